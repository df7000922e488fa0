from __future__ import annotations

from django.conf import settings
from django.db import transaction

from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.policies.models import DEFAULT_METRICS, FairnessPolicy, ReferenceRule


def policy_seed(*, using: str = "default") -> FairnessPolicy | None:
    """Version 1 from FAIRNESS_TOLERANCE / FAIRNESS_ALPHA, once; None when a policy exists already."""
    with transaction.atomic(using=using):
        if FairnessPolicy.objects.using(using).exists():
            return None
        policy = FairnessPolicy.objects.using(using).create(
            version=1,
            tolerance=settings.FAIRNESS_TOLERANCE,
            alpha=settings.FAIRNESS_ALPHA,
            metrics=list(DEFAULT_METRICS),
            reference_rule=ReferenceRule.LARGEST,
            min_group_size=None,
            reason="Seeded from FAIRNESS_TOLERANCE and FAIRNESS_ALPHA at the first migrate.",
        )
        if using == "default":
            event_record(actor=None, verb=Verb.FAIRNESS_POLICY_CREATED, target=policy, data=policy.as_document())
        return policy
