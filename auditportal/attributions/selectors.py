from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from auditportal.accounts.models import User
from auditportal.attributions import rules
from auditportal.attributions.models import AttributionState, TrialAttribution
from auditportal.experiments.models import Trial
from auditportal.experiments.selectors import experiment_list


def attribution_list(*, user: User, trial: Trial) -> QuerySet[TrialAttribution]:
    """``trial``'s attributions (the trial already scoped to ``user``), newest first; none for an account
    without a role."""
    if not rules.can_read(user):
        return TrialAttribution.objects.none()
    return TrialAttribution.objects.filter(trial=trial).select_related("created_by", "dataset_version")


def attribution_get(*, user: User, trial: Trial, attribution_id: int) -> TrialAttribution:
    try:
        return attribution_list(user=user, trial=trial).get(pk=attribution_id)
    except TrialAttribution.DoesNotExist:
        raise Http404("No such attribution of this trial.") from None


def attribution_for_report(*, trial: Trial, checkpoint: str) -> TrialAttribution | None:
    """The attribution a trial's signed report shows: the newest done one of ``checkpoint`` (the one the
    review request names), whatever its sample; None when there is none. Not scoped by a user: the
    decision's report context reads it, as it reads the request's documents."""
    return (
        TrialAttribution.objects.filter(trial=trial, checkpoint=checkpoint, state=AttributionState.DONE)
        .order_by("-completed_at", "-id")
        .first()
    )


def attribution_get_any(*, user: User, attribution_id: int) -> TrialAttribution:
    """One attribution of a trial ``user`` may see; 404 otherwise."""
    try:
        return TrialAttribution.objects.select_related(
            "trial__experiment__dataset_version__dataset", "created_by", "dataset_version"
        ).get(pk=attribution_id, trial__experiment__in=experiment_list(user=user).values("pk"))
    except TrialAttribution.DoesNotExist:
        raise Http404("No such attribution.") from None
