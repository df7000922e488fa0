"""Admin pages: evidence view only (lib/admin.EvidenceAdmin); API tokens view only, revoked through an
action that calls approvals.services (they are made with `manage.py api_token create`)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from auditportal.accounts.permissions import request_user
from auditportal.approvals.models import (
    Acknowledgement,
    ApiToken,
    Comment,
    Recommendation,
    ReviewRequest,
    ReviewVote,
    Waiver,
    WaiverVote,
)
from auditportal.fairness.errors import UserError
from auditportal.lib.admin import EvidenceAdmin


@admin.register(ReviewRequest)
class ReviewRequestAdmin(EvidenceAdmin[ReviewRequest]):
    list_display = ["id", "title", "model_identifier", "subject_kind", "state", "round", "requested_by", "created_at"]
    list_filter = ["state", "subject_kind"]
    search_fields = ["title", "model_identifier"]


@admin.register(ReviewVote)
class ReviewVoteAdmin(EvidenceAdmin[ReviewVote]):
    list_display = ["id", "request", "round", "voter", "choice", "cast_at", "supersedes"]
    list_filter = ["choice"]


@admin.register(Acknowledgement)
class AcknowledgementAdmin(EvidenceAdmin[Acknowledgement]):
    list_display = ["id", "vote", "attribute", "metric", "group", "positives_needed"]


@admin.register(Recommendation)
class RecommendationAdmin(EvidenceAdmin[Recommendation]):
    list_display = ["id", "request", "round", "reviewer", "choice", "created_at"]


@admin.register(Comment)
class CommentAdmin(EvidenceAdmin[Comment]):
    list_display = ["id", "request", "author", "parent", "created_at"]


@admin.register(Waiver)
class WaiverAdmin(EvidenceAdmin[Waiver]):
    list_display = ["id", "request", "round", "attribute", "metric", "group", "state", "expires_at", "proposed_by"]
    list_filter = ["state"]


@admin.register(WaiverVote)
class WaiverVoteAdmin(EvidenceAdmin[WaiverVote]):
    list_display = ["id", "waiver", "voter", "choice", "cast_at", "supersedes"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    """Lists tokens (never their secret: only the hash is stored); no add, change or delete; the one
    action revokes them through the service."""

    list_display = ["id", "name", "user", "scope", "token_key", "created", "expiry", "revoked_at", "revoked_by"]
    list_filter = ["scope"]
    exclude = ["digest"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False

    @admin.action(description="Revoke the selected API tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        # Imported on use: the admin modules are imported when any process starts (admin autodiscovery),
        # and the approvals services import the experiments' and the reports' services with them.
        from auditportal.approvals import services

        user = request_user(request)
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True):
            try:
                services.api_token_revoke(user=user, token=token)
            except (UserError, PermissionDenied) as exc:
                self.message_user(request, f"Token #{token.pk}: {exc}", messages.ERROR)
                continue
            revoked += 1
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)
