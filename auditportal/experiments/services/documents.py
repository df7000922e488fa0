"""Freezing a trial's validation as a verdict document (docs/verdict-documents.md): on request, and
when the trial completes. The document is built here and stored by evidence.services."""

from __future__ import annotations

import logging

from django.db import transaction

from auditportal.accounts.models import User
from auditportal.datasets.models import IntegrityPurpose
from auditportal.datasets.services import DatasetIntegrityError, dataset_version_check_integrity
from auditportal.evidence.models import FreezeTrigger, VerdictDocument
from auditportal.evidence.rules import check_freeze
from auditportal.evidence.services import verdict_document_store
from auditportal.experiments import selectors as experiment_selectors
from auditportal.experiments.models import Trial
from auditportal.fairness.documents import verdict_documents
from auditportal.fairness.errors import UserError
from auditportal.fairness.files.metricsfile import confusion_counts
from auditportal.policies.models import FairnessPolicy
from auditportal.policies.selectors import policy_active

logger = logging.getLogger(__name__)


class NoValidation(UserError):
    pass


def verdict_document_freeze_trial(*, user: User, trial: Trial, step: int) -> VerdictDocument:
    """An engineer's or reviewer's freeze of one validation of ``trial``, judged under the active policy.

    Refused for other roles (FreezerRequired: 403), for a step without a validation, and when the dataset
    version's stored file no longer has its registered SHA-256 (DatasetIntegrityError).
    """
    # The experiment must be visible to the user: outsiders learn nothing (404).
    experiment_selectors.experiment_get(user=user, experiment_id=trial.experiment_id)
    check_freeze(user)
    if not experiment_selectors.trial_validation_counts(trial=trial, step=step):
        raise NoValidation(
            f"Trial {trial.number} of experiment {trial.experiment_id} has no validation counts at step {step}.",
            field="step",
        )
    return _freeze_trial(trial=trial, step=step, policy=policy_active(), user=user, trigger=FreezeTrigger.REQUESTED)


def verdict_document_freeze_trial_completed(*, trial: Trial) -> VerdictDocument | None:
    """Freeze a completed trial's last validation; None when it reported none or its data failed the
    integrity check (logged; the check records its own event). Call outside any transaction, after the
    trial's metrics are ingested."""
    trial.refresh_from_db()
    step = trial.latest_step
    if step is None or not experiment_selectors.trial_validation_counts(trial=trial, step=step):
        return None
    verdict = trial.verdicts.filter(step=step, policy__isnull=False).select_related("policy").first()
    policy = verdict.policy if verdict is not None and verdict.policy is not None else policy_active()
    try:
        return _freeze_trial(trial=trial, step=step, policy=policy, user=None, trigger=FreezeTrigger.TRIAL_COMPLETED)
    except DatasetIntegrityError as exc:
        logger.warning("%s: final validation not frozen: %s", trial, exc)
        return None


def _freeze_trial(
    *, trial: Trial, step: int, policy: FairnessPolicy, user: User | None, trigger: FreezeTrigger
) -> VerdictDocument:
    experiment = trial.experiment
    version = experiment.dataset_version
    # Outside the transaction below: a failed check records its event, which must stay.
    dataset_version_check_integrity(version=version, actor=user, purpose=IntegrityPurpose.FREEZE)
    counts = confusion_counts(experiment_selectors.trial_validation_counts(trial=trial, step=step))
    document = verdict_documents.trial_validation_document(
        counts=counts,
        step=step,
        dataset_version={"name": version.dataset.name, "number": version.number, "sha256": version.sha256},
        experiment={
            "id": experiment.pk,
            "name": experiment.name,
            "det_experiment_id": experiment.det_experiment_id,
            "config_yaml": experiment.config_yaml,
        },
        trial={"number": trial.number, "det_trial_id": trial.det_trial_id, "hparams": trial.hparams},
        policy=policy.as_document(),
    )
    with transaction.atomic():
        return verdict_document_store(
            frozen=verdict_documents.freeze(document),
            policy=policy,
            trigger=trigger,
            frozen_by=user,
            trial_id=trial.pk,
            step=step,
        )
