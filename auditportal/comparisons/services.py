"""Writes of the comparisons app: a paired comparison of two models on the same rows."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.audits.services import inline_read_limits, prediction_audit_runs_inline
from auditportal.comparisons import rules
from auditportal.comparisons.models import PairedComparison
from auditportal.datasets.services import dataset_read_limits
from auditportal.evidence.models import FreezeTrigger, VerdictDocument
from auditportal.evidence.services import verdict_document_store
from auditportal.fairness.documents import verdict_documents
from auditportal.fairness.errors import UserError
from auditportal.fairness.files import tabular
from auditportal.fairness.files.tabular import DatasetError
from auditportal.fairness.statistics.paired_file import PairedSpec, compare_predictions
from auditportal.policies.models import FairnessPolicy
from auditportal.policies.selectors import policy_active

logger = logging.getLogger(__name__)


def comparison_create(
    *,
    user: User,
    source: Path,
    original_name: str,
    spec: PairedSpec,
    sha256: str | None = None,
    limits: tabular.ReadLimits | None = None,
    web: bool = False,
) -> PairedComparison:
    """Compare the champion's and the challenger's predictions in ``source`` per group and store the
    result; the file itself is not kept, only its SHA-256.

    The active fairness policy decides the tolerance and alpha (whatever ``spec`` says), as for a
    prediction audit; the comparison records its version. Raises DatasetError (the file) or
    PairedInputError (the parameters), both UserErrors naming the field. ``web``: in a web request
    (page or API) the file must be one an audit would run in the request (AUDIT_INLINE_MAX_SIZE,
    AUDIT_INLINE_MAX_ROWS); larger files are compared with ``manage.py compare_predictions``.

    The comparison's verdict document (docs/verdict-documents.md) is frozen in the same transaction: a
    comparison never changes, so it has exactly one, which a review request can bind.
    """
    rules.check_create(user)
    policy = policy_active()
    spec = dataclasses.replace(spec, tolerance=policy.tolerance, alpha=policy.alpha)
    spec.check()
    tabular.check_file_name(original_name)
    if not source.is_file():
        raise DatasetError("the file does not exist or is not a regular file", file=original_name)
    if web:
        if not prediction_audit_runs_inline(source=source):
            raise UserError(
                "the file is too large to compare in a web request; compare it with manage.py compare_predictions",
                field="file",
            )
        limits = limits or inline_read_limits()
    outcome = compare_predictions(
        source,
        spec,
        display_name=original_name,
        max_bytes=settings.DATASET_MAX_UPLOAD_BYTES,
        sha256=sha256,
        policy=policy.as_document(),
        limits=limits or dataset_read_limits(),
    )
    return paired_comparison_store(
        user=user,
        original_name=original_name,
        outcome=outcome,
        document=outcome.document,
        policy=policy,
        champion=spec.champion,
        challenger=spec.challenger,
        parameters=spec.parameters(),
        event={"champion": spec.champion, "challenger": spec.challenger},
    )


def paired_comparison_store(
    *,
    user: User,
    original_name: str,
    outcome: Any,
    document: dict[str, Any],
    policy: FairnessPolicy,
    champion: str,
    challenger: str,
    parameters: dict[str, Any],
    event: dict[str, Any],
    **links: Any,
) -> PairedComparison:
    """Store a compared file (``outcome``: its format, SHA-256, size and rows) as a comparison with its
    event (``event``: what names the two models) and its frozen verdict document, in one transaction;
    ``links`` are the comparison's further fields (its source, the audits compared)."""
    with transaction.atomic():
        comparison = PairedComparison.objects.create(
            created_by=user,
            original_name=original_name,
            file_format=outcome.file_format,
            sha256=outcome.sha256,
            size_bytes=outcome.size_bytes,
            num_rows=outcome.num_rows,
            champion=champion,
            challenger=challenger,
            parameters=parameters,
            result=document,
            verdict=document["verdict"] or "",
            policy=policy,
            **links,
        )
        event_record(
            actor=user,
            verb=Verb.PAIRED_COMPARISON_CREATED,
            target=comparison,
            data={
                "file": original_name,
                "sha256": outcome.sha256,
                "rows": outcome.num_rows,
                **event,
                "verdict": document["verdict"],
                "policy": policy.version,
            },
        )
        # Frozen with the comparison, as an audit is: what the committee votes on ("B replaces A").
        verdict_document_freeze_paired_comparison(comparison=comparison)
    logger.info("%s: %d rows, verdict %s", comparison, comparison.num_rows, comparison.verdict or "none")
    return comparison


def verdict_document_freeze_paired_comparison(*, comparison: PairedComparison) -> VerdictDocument:
    """Freeze a paired comparison's document; call inside the transaction that stores the comparison."""
    assert comparison.policy is not None
    document = verdict_documents.paired_comparison_document(
        result=comparison.result,
        file_name=comparison.original_name,
        sha256=comparison.sha256,
        rows=comparison.num_rows,
        parameters=comparison.parameters,
        policy=comparison.policy.as_document(),
    )
    return verdict_document_store(
        frozen=verdict_documents.freeze(document),
        policy=comparison.policy,
        trigger=FreezeTrigger.CREATED,
        paired_comparison_id=comparison.pk,
    )
