"""Storing verdict documents (docs/verdict-documents.md). The only writes of VerdictDocument: there is
no update and no delete.

The apps that judge build their subjects' documents (audits.services for a prediction audit,
experiments.services for a trial's validation) and store them here.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.evidence.models import DocumentKind, FreezeTrigger, VerdictDocument
from auditportal.fairness.documents import verdict_documents
from auditportal.policies.models import FairnessPolicy


def verdict_document_store(
    *,
    frozen: verdict_documents.Frozen,
    policy: FairnessPolicy,
    trigger: FreezeTrigger,
    frozen_by: User | None = None,
    prediction_audit_id: int | None = None,
    trial_id: int | None = None,
    step: int | None = None,
    paired_comparison_id: int | None = None,
) -> VerdictDocument:
    """The document of one subject with these bytes: the stored one, or a new one with its event.

    The subject is a prediction audit (``prediction_audit_id``), one validation of a trial
    (``trial_id`` and ``step``) or a paired comparison (``paired_comparison_id``). Call inside the
    caller's transaction when the document must be stored with the subject (a new audit's or
    comparison's); it opens its own otherwise.
    """
    subject: dict[str, Any]
    ids = {
        "prediction_audit_id": prediction_audit_id,
        "trial_id": trial_id,
        "paired_comparison_id": paired_comparison_id,
    }
    given = [name for name, value in ids.items() if value is not None]
    if given == ["prediction_audit_id"] and step is None:
        kind, subject = DocumentKind.PREDICTION_AUDIT, {"prediction_audit_id": prediction_audit_id}
    elif given == ["trial_id"] and step is not None:
        kind, subject = DocumentKind.TRIAL_VALIDATION, {"trial_id": trial_id, "step": step}
    elif given == ["paired_comparison_id"] and step is None:
        kind, subject = DocumentKind.PAIRED_COMPARISON, {"paired_comparison_id": paired_comparison_id}
    else:
        raise ValueError(
            "a verdict document's subject is a prediction audit, a trial and a step, or a paired comparison"
        )
    existing = VerdictDocument.objects.filter(**subject, sha256=frozen.sha256).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            document = VerdictDocument.objects.create(
                kind=kind,
                **subject,
                schema_version=verdict_documents.SCHEMA_VERSION,
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
                    "step": step,
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
    if "prediction_audit_id" in subject:
        return f"audits.predictionaudit:{subject['prediction_audit_id']}"
    if "paired_comparison_id" in subject:
        return f"comparisons.pairedcomparison:{subject['paired_comparison_id']}"
    return f"experiments.trial:{subject['trial_id']}"
