from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class PoliciesConfig(AppConfig):
    name = "auditportal.policies"
    label = "policies"
    verbose_name = "Fairness policy"

    def ready(self) -> None:
        # Version 1 is seeded from the environment after the first migrate (and after a test
        # database is flushed), like contenttypes and permissions; later versions only through
        # policies.services.policy_create.
        post_migrate.connect(_seed, sender=self)


def _seed(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    from auditportal.policies.services import policy_seed

    policy_seed(using=using)
