from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.audits import rules
from auditportal.audits.models import PredictionAudit
from auditportal.audits.signals import prediction_audit_retired
from auditportal.datasets.services import dataset_read_limits
from auditportal.evidence.models import FreezeTrigger, VerdictDocument
from auditportal.evidence.services import verdict_document_store
from auditportal.fairness.documents import verdict_documents
from auditportal.fairness.errors import UserError
from auditportal.fairness.files import tabular
from auditportal.fairness.files.tabular import DatasetError
from auditportal.fairness.statistics.audit import AuditSpec, audit_predictions
from auditportal.policies.models import FairnessPolicy
from auditportal.policies.selectors import policy_active

logger = logging.getLogger(__name__)

RETIRE_REASON_MAX_LENGTH = 2000


# What the fairness policy decides, not the person running an audit.
POLICY_PARAMETERS = ("tolerance", "alpha")


class SetByPolicy(UserError):
    def __init__(self, field: str, policy: FairnessPolicy) -> None:
        super().__init__(
            f"set by the fairness policy (version {policy.version}); administrators change it on /policy/",
            field=field,
        )


def refuse_policy_parameters(given: list[str]) -> None:
    """Raise SetByPolicy for the first policy parameter a request tried to set."""
    for field in POLICY_PARAMETERS:
        if field in given:
            raise SetByPolicy(field, policy_active())


def prediction_audit_run(
    *, user: User, source: Path, original_name: str, spec: AuditSpec, sha256: str | None = None
) -> PredictionAudit:
    """Audit the predictions in ``source`` and store the result; the file itself is not kept.

    The active fairness policy decides the tolerance, alpha, judged metrics and minimum group size
    (whatever ``spec`` says about them); the audit records its version.

    ``sha256`` is the digest of ``source`` when it was taken as the file was received (uploads);
    otherwise the file is hashed as it is read. Raises DatasetError for problems with the file and
    AuditSpecError for impossible parameters (both UserErrors).
    """
    rules.check_run(user)
    policy = policy_active()
    spec = dataclasses.replace(
        spec,
        tolerance=policy.tolerance,
        alpha=policy.alpha,
        metrics=tuple(policy.metrics),
        min_group_size=policy.min_group_size,
    )
    spec.check()
    tabular.check_file_name(original_name)
    if not source.is_file():
        raise DatasetError("the file does not exist or is not a regular file", file=original_name)
    outcome = audit_predictions(
        source,
        spec,
        display_name=original_name,
        max_bytes=settings.DATASET_MAX_UPLOAD_BYTES,
        sha256=sha256,
        policy=policy.as_document(),
        limits=dataset_read_limits(),
    )
    with transaction.atomic():
        audit = PredictionAudit.objects.create(
            created_by=user,
            original_name=original_name,
            file_format=outcome.file_format,
            sha256=outcome.sha256,
            size_bytes=outcome.size_bytes,
            num_rows=outcome.num_rows,
            parameters=spec.parameters(),
            result=outcome.document,
            verdict=outcome.document["verdict"] or "",
            policy=policy,
        )
        event_record(
            actor=user,
            verb=Verb.PREDICTION_AUDIT_CREATED,
            target=audit,
            data={
                "file": original_name,
                "sha256": outcome.sha256,
                "rows": outcome.num_rows,
                "verdict": outcome.document["verdict"],
                "policy": policy.version,
            },
        )
        verdict_document_freeze_prediction_audit(audit=audit)
    logger.info("%s: %d rows, verdict %s", audit, audit.num_rows, audit.verdict or "none")
    return audit


def verdict_document_freeze_prediction_audit(*, audit: PredictionAudit) -> VerdictDocument:
    """Freeze a prediction audit's document; call inside the transaction that stores the audit."""
    policy = audit.policy or policy_active()
    document = verdict_documents.prediction_audit_document(
        result=audit.result,
        file_name=audit.original_name,
        sha256=audit.sha256,
        rows=audit.num_rows,
        parameters=audit.parameters,
        policy=policy.as_document(),
    )
    return verdict_document_store(
        frozen=verdict_documents.freeze(document),
        policy=policy,
        trigger=FreezeTrigger.CREATED,
        prediction_audit_id=audit.pk,
    )


def prediction_audit_retire(*, user: User, audit: PredictionAudit, reason: str) -> PredictionAudit:
    """Mark ``audit`` as no longer to be relied on. It stays, with its document; nothing is deleted.

    Allowed for the audit's author, a reviewer or an administrator (PermissionDenied otherwise).
    A reason is required and an audit is retired once (UserError).
    """
    rules.check_retire(user, audit)
    reason = reason.strip()
    if not reason:
        raise UserError("Say why this audit is retired.", field="reason")
    if len(reason) > RETIRE_REASON_MAX_LENGTH:
        raise UserError(f"Keep the reason under {RETIRE_REASON_MAX_LENGTH} characters.", field="reason")
    with transaction.atomic():
        # A conditional UPDATE: of two people retiring at once, exactly one succeeds.
        retired = PredictionAudit.objects.filter(pk=audit.pk, retired_at__isnull=True).update(
            retired_at=timezone.now(), retired_by=user, retired_reason=reason
        )
        audit.refresh_from_db()
        if not retired:
            raise UserError(
                f"This audit was already retired on {audit.retired_at:%Y-%m-%d %H:%M} UTC"
                f" by {audit.retired_by or 'an unknown user'}."
            )
        event_record(actor=user, verb=Verb.PREDICTION_AUDIT_RETIRED, target=audit, data={"reason": reason})
        prediction_audit_retired.send(sender=PredictionAudit, audit=audit, by=user, reason=reason)
    logger.info("%s retired by %s", audit, user)
    return audit
