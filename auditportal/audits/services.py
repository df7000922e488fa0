from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.audits.models import PredictionAudit
from auditportal.evidence.services import verdict_document_freeze_prediction_audit
from auditportal.fairness import tabular
from auditportal.fairness.audit import AuditSpec, audit_predictions
from auditportal.fairness.tabular import DatasetError

logger = logging.getLogger(__name__)

AUDITOR_ROLES = (Role.ML_ENGINEER, Role.REVIEWER)


class AuditorRequired(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("Only an ML engineer or a reviewer can run prediction audits.")


def can_run_audits(user: User) -> bool:
    return user.is_authenticated and any(user.has_role(role) for role in AUDITOR_ROLES)


def require_auditor(user: User) -> None:
    if not can_run_audits(user):
        raise AuditorRequired


def prediction_audit_run(
    *, user: User, source: Path, original_name: str, spec: AuditSpec, sha256: str | None = None
) -> PredictionAudit:
    """Audit the predictions in ``source`` and store the result; the file itself is not kept.

    ``sha256`` is the digest of ``source`` when it was taken as the file was received (uploads);
    otherwise the file is hashed as it is read. Raises DatasetError for problems with the file and
    AuditSpecError for impossible parameters (both UserErrors).
    """
    require_auditor(user)
    spec.check()
    tabular.check_file_name(original_name)
    if not source.is_file():
        raise DatasetError("the file does not exist or is not a regular file", file=original_name)
    outcome = audit_predictions(
        source, spec, display_name=original_name, max_bytes=settings.DATASET_MAX_UPLOAD_BYTES, sha256=sha256
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
            },
        )
        verdict_document_freeze_prediction_audit(audit=audit)
    logger.info("%s: %d rows, verdict %s", audit, audit.num_rows, audit.verdict or "none")
    return audit
