from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from knox.settings import CONSTANTS

from auditportal.fairness.text import words


class Role(models.TextChoices):
    DATA_STEWARD = "data_steward", "Data steward"
    ML_ENGINEER = "ml_engineer", "ML engineer"
    REVIEWER = "reviewer", "Reviewer"
    ETHICS_COMMITTEE = "ethics_committee", "Ethics-committee member"
    ADMIN = "admin", "Administrator"

    @property
    def noun(self) -> str:
        """The role inside a sentence: "ML engineer", "data steward" (never "ml engineer")."""
        return words.in_sentence(str(self.label))

    @property
    def with_article(self) -> str:
        """The role after its article: "an ML engineer", "a data steward", "an administrator"."""
        return words.with_article(self.noun)


class User(AbstractUser):
    # Roles live in RoleGrant rows (a user may hold several); this cache avoids one query per check.
    _role_cache: frozenset[str] | None = None

    class Meta:
        db_table = "accounts_user"

    @property
    def roles(self) -> frozenset[str]:
        if self._role_cache is None:
            if self.pk is None:
                self._role_cache = frozenset()
            else:
                self._role_cache = frozenset(self.role_grants.values_list("role", flat=True))
        return self._role_cache

    # Django's is_superuser opens the admin site only: a portal role, reviewer or committee member
    # included, is held only through a RoleGrant (accounts.services.role_grant records who gave it).
    def has_role(self, role: Role | str) -> bool:
        return str(role) in self.roles

    @property
    def is_member(self) -> bool:
        """A member holds at least one role; an account without roles sees nothing."""
        return bool(self.roles)

    def forget_roles(self) -> None:
        self._role_cache = None


class RoleGrant(models.Model):
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="role_grants")
    role = models.CharField(max_length=32, choices=Role.choices)
    granted_at = models.DateTimeField(auto_now_add=True)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    # A role that decides (rules.DECIDING_ROLES) takes effect through a proposal a different
    # administrator confirmed: granted_by is the confirmer, the proposal names its proposer.
    proposal = models.OneToOneField(
        "RoleGrantProposal", on_delete=models.PROTECT, null=True, blank=True, related_name="grant"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "role"], name="accounts_rolegrant_unique_user_role"),
            models.CheckConstraint(
                condition=models.Q(role__in=[choice.value for choice in Role]),
                name="accounts_rolegrant_role_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.get_role_display()}"


class RoleGrantProposal(models.Model):
    """A grant of a role that decides (rules.DECIDING_ROLES: the ethics committee, the administrators),
    waiting for a different administrator's confirmation: the two-person rule (docs/governance.md,
    "Roles that decide: the two-person rule").

    Append-only: never edited. Its confirmation or withdrawal is a ``RoleGrantProposalClosure`` row (one
    per proposal) with its event; a confirmation also makes the RoleGrant (RoleGrant.proposal).
    """

    user = models.ForeignKey(User, on_delete=models.PROTECT, related_name="role_proposals")
    role = models.CharField(max_length=32, choices=Role.choices)
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    proposed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(role__in=[choice.value for choice in Role]),
                name="accounts_rolegrantproposal_role_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"Role proposal #{self.pk}: {self.user} as {self.get_role_display()}"


class RoleProposalOutcome(models.TextChoices):
    CONFIRMED = "confirmed", "confirmed"
    WITHDRAWN = "withdrawn", "withdrawn"


class RoleGrantProposalClosure(models.Model):
    """How a role proposal ended: confirmed by a different administrator, or withdrawn. One per proposal."""

    proposal = models.OneToOneField(RoleGrantProposal, on_delete=models.PROTECT, related_name="closure")
    outcome = models.CharField(max_length=16, choices=RoleProposalOutcome.choices)
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    closed_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Role proposal #{self.proposal_id} {self.outcome}"


class TokenScope(models.TextChoices):
    GATE = "gate", "Read the approval gate and deployments' status"
    # The rest of /api/v1/ as the token's account, with that account's roles (a CI pipeline that
    # audits predictions or launches experiments): the browser logs in, a machine sends a token.
    API = "api", "Use the API as its account"
    # A serving pipeline's: post prediction batches to deployments and read their status (the
    # monitoring app; docs/monitoring.md). Like a gate token's, its account holds no role.
    MONITORING = "monitoring", "Post production batches and read deployments"


class ApiToken(models.Model):
    """A machine account's API token, in django-rest-knox's form (knox makes and hashes it; the portal's
    settings name this model as knox's token model): only the SHA-512 ``digest`` of the token and its
    first characters (``token_key``, for lookup) are stored; the token itself is shown once, when it is
    made. A revoked or expired token is kept, and refused.
    """

    digest = models.CharField(max_length=CONSTANTS.DIGEST_LENGTH, unique=True)
    token_key = models.CharField(
        max_length=CONSTANTS.MAXIMUM_TOKEN_PREFIX_LENGTH + CONSTANTS.TOKEN_KEY_LENGTH, db_index=True
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="api_tokens")
    created = models.DateTimeField(auto_now_add=True)
    expiry = models.DateTimeField()
    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=16, choices=TokenScope.choices, default=TokenScope.GATE)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        # The table (and its constraint's name) from when tokens lived in the approvals app: migration
        # accounts/0002 moved the model without touching the rows, so every token issued before works.
        db_table = "approvals_apitoken"
        ordering = ["-created", "-id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(scope__in=TokenScope.values), name="approvals_token_scope_valid"),
        ]

    def __str__(self) -> str:
        return f"API token #{self.pk} {self.name!r} of {self.user}"
