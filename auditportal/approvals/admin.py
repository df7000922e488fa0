"""Admin pages: evidence view only (lib/admin.EvidenceAdmin)."""

from __future__ import annotations

from django.contrib import admin

from auditportal.approvals.models import (
    Acknowledgement,
    Comment,
    Recommendation,
    ReviewRequest,
    ReviewVote,
    WaivedComparison,
    Waiver,
    WaiverVote,
)
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
    # attribute, metric, group: the scope's first comparison (the whole scope: WaivedComparison).
    list_display = ["id", "request", "round", "attribute", "metric", "group", "state", "expires_at", "proposed_by"]
    list_filter = ["state"]


@admin.register(WaivedComparison)
class WaivedComparisonAdmin(EvidenceAdmin[WaivedComparison]):
    list_display = ["id", "waiver", "attribute", "metric", "group", "reference", "document"]


@admin.register(WaiverVote)
class WaiverVoteAdmin(EvidenceAdmin[WaiverVote]):
    list_display = ["id", "waiver", "voter", "choice", "cast_at", "supersedes"]
