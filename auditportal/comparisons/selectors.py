from __future__ import annotations

from django.db.models import Count, QuerySet
from django.http import Http404

from auditportal.accounts.models import User
from auditportal.audits.models import PredictionAudit
from auditportal.audits.selectors import prediction_audit_list
from auditportal.comparisons import rules
from auditportal.comparisons.models import PairedComparison
from auditportal.experiments.models import Backend, Trial, TrialState
from auditportal.experiments.selectors import experiment_list


def comparison_list(*, user: User) -> QuerySet[PairedComparison]:
    """Every comparison for a member (as every audit); none for an account without a role."""
    if not rules.can_read(user):
        return PairedComparison.objects.none()
    return PairedComparison.objects.select_related(
        "created_by", "policy", "champion_audit", "challenger_audit"
    ).order_by("-created_at", "-id")


def comparison_get(*, user: User, comparison_id: int) -> PairedComparison:
    try:
        return comparison_list(user=user).get(pk=comparison_id)
    except PairedComparison.DoesNotExist:
        raise Http404("No such comparison.") from None


# The most choices a page's select offers (the newest first); the API and the command take any id.
CHOICES_SHOWN = 300


def audits_to_pair(*, user: User) -> list[PredictionAudit]:
    """The audits the page offers to pair: not retired, of a file audited at least twice (a pair needs
    two audits of the same file), newest first."""
    audits = prediction_audit_list(user=user).filter(retired_at__isnull=True)
    shared = audits.order_by().values("sha256").annotate(audits=Count("id")).filter(audits__gte=2).values("sha256")
    return list(audits.filter(sha256__in=shared).order_by("-created_at", "-id")[:CHOICES_SHOWN])


def trials_to_pair(*, user: User) -> list[Trial]:
    """The trials the page offers to pair: completed, with a checkpoint, trained on the portal's own
    (local) backend, of experiments ``user`` may see; newest first."""
    return list(
        Trial.objects.filter(
            experiment__in=experiment_list(user=user).values("pk"),
            state=TrialState.COMPLETED,
            experiment__backend=Backend.LOCAL,
        )
        .exclude(checkpoint="")
        .select_related("experiment__dataset_version__dataset")
        .order_by("-id")[:CHOICES_SHOWN]
    )
