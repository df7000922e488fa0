"""Freezing verdict documents (docs/verdict-documents.md). The only writes of VerdictDocument: there is
no update and no delete."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import IntegrityPurpose
from auditportal.datasets.services import DatasetIntegrityError, dataset_version_check_integrity
from auditportal.evidence.models import DocumentKind, FreezeTrigger, VerdictDocument
from auditportal.experiments import selectors as experiment_selectors
from auditportal.experiments.models import Trial
from auditportal.fairness import documents
from auditportal.fairness.errors import UserError
from auditportal.fairness.metricsfile import confusion_counts
from auditportal.policies.models import FairnessPolicy
from auditportal.policies.selectors import policy_active

logger = logging.getLogger(__name__)

FREEZER_ROLES = (Role.ML_ENGINEER, Role.REVIEWER)


class FreezerRequired(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("Only an ML engineer or a reviewer can freeze a verdict document.")


class NoValidation(UserError):
    pass


def can_freeze(user: User) -> bool:
    return user.is_authenticated and any(user.has_role(role) for role in FREEZER_ROLES)


def verdict_document_freeze_prediction_audit(*, audit: PredictionAudit) -> VerdictDocument:
    """Freeze a prediction audit's document; call inside the transaction that stores the audit."""
    policy = audit.policy or policy_active()
    document = documents.prediction_audit_document(
        result=audit.result,
        file_name=audit.original_name,
        sha256=audit.sha256,
        rows=audit.num_rows,
        parameters=audit.parameters,
        policy=policy.as_document(),
    )
    return _store(
        kind=DocumentKind.PREDICTION_AUDIT,
        subject={"prediction_audit": audit},
        frozen=documents.freeze(document),
        policy=policy,
        frozen_by=None,
        trigger=FreezeTrigger.CREATED,
    )


def verdict_document_freeze_trial(*, user: User, trial: Trial, step: int) -> VerdictDocument:
    """An engineer's or reviewer's freeze of one validation of ``trial``, judged under the active policy.

    Refused for other roles (FreezerRequired: 403), for a step without a validation, and when the dataset
    version's stored file no longer has its registered SHA-256 (DatasetIntegrityError).
    """
    # The experiment must be visible to the user: outsiders learn nothing (404).
    experiment_selectors.experiment_get(user=user, experiment_id=trial.experiment_id)
    if not can_freeze(user):
        raise FreezerRequired
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
    document = documents.trial_validation_document(
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
        return _store(
            kind=DocumentKind.TRIAL_VALIDATION,
            subject={"trial": trial, "step": step},
            frozen=documents.freeze(document),
            policy=policy,
            frozen_by=user,
            trigger=trigger,
        )


def _store(
    *,
    kind: DocumentKind,
    subject: dict[str, Any],
    frozen: documents.Frozen,
    policy: FairnessPolicy,
    frozen_by: User | None,
    trigger: FreezeTrigger,
) -> VerdictDocument:
    """The document for ``subject`` with these bytes: the stored one, or a new one with its event."""
    existing = VerdictDocument.objects.filter(**subject, sha256=frozen.sha256).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            document = VerdictDocument.objects.create(
                kind=kind,
                **subject,
                schema_version=documents.SCHEMA_VERSION,
                canonical=frozen.canonical,
                sha256=frozen.sha256,
                policy=policy,
                frozen_by=frozen_by,
                trigger=trigger,
            )
            event_record(
                actor=frozen_by,
                verb=Verb.VERDICT_DOCUMENT_FROZEN,
                target=document,
                data={
                    "kind": kind.value,
                    "subject": _subject_label(subject),
                    "step": subject.get("step"),
                    "sha256": frozen.sha256,
                    "policy": policy.version,
                    "trigger": trigger.value,
                    "verdict": frozen.document.get("verdict"),
                },
            )
    except IntegrityError:
        # Frozen at the same moment by someone else: theirs is the same document.
        return VerdictDocument.objects.get(**subject, sha256=frozen.sha256)
    return document


def _subject_label(subject: dict[str, Any]) -> str:
    if "prediction_audit" in subject:
        return f"audits.predictionaudit:{subject['prediction_audit'].pk}"
    return f"experiments.trial:{subject['trial'].pk}"
