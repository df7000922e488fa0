from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models


class Role(models.TextChoices):
    DATA_STEWARD = "data_steward", "Data steward"
    ML_ENGINEER = "ml_engineer", "ML engineer"
    REVIEWER = "reviewer", "Reviewer"
    ETHICS_COMMITTEE = "ethics_committee", "Ethics-committee member"
    ADMIN = "admin", "Administrator"


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
