"""A paired comparison of two prediction audits of the same file (docs/comparisons.md, "Two audits").

An audit keeps its parameters and per-group counts, not its rows, so the user gives the file again:
its SHA-256 must be the one both audits recorded. Each model's predictions are then taken exactly as
its audit took them (fairness/statistics/paired_audits), compared row by row as one file's two models
are, and each model's own counts are held to the counts its audit recorded before anything is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from django.conf import settings

from auditportal.accounts.models import User
from auditportal.audits.models import PredictionAudit
from auditportal.audits.services import inline_read_limits, prediction_audit_runs_inline
from auditportal.comparisons import rules
from auditportal.comparisons.models import ComparisonSource, PairedComparison
from auditportal.comparisons.services import paired_comparison_store
from auditportal.datasets.services import dataset_read_limits
from auditportal.evidence.selectors import verdict_documents_of_audit
from auditportal.fairness.errors import UserError
from auditportal.fairness.files import tabular
from auditportal.fairness.files.tabular import DatasetError
from auditportal.fairness.statistics import paired, paired_audits, stats
from auditportal.fairness.statistics.paired_audits import AuditedModel
from auditportal.fairness.statistics.paired_file import MODELS, compare_outputs
from auditportal.policies.selectors import policy_active

logger = logging.getLogger(__name__)

AUDIT_FIELDS: Final = ("champion_audit", "challenger_audit")


def _short(sha256: str) -> str:
    return f"{sha256[:12]}…"


def check_audits(*, champion: PredictionAudit, challenger: PredictionAudit) -> None:
    """Refuse, naming the field, two audits that cannot be paired whatever the file: the same audit
    twice, a retired audit, or audits of two different files (their SHA-256s differ)."""
    if champion.pk == challenger.pk:
        raise UserError(
            f"audit {challenger.pk} is also the champion; compare two different audits of the same file",
            field="challenger_audit",
        )
    for audit, field in zip((champion, challenger), AUDIT_FIELDS, strict=True):
        if audit.retired_at is not None:
            by = audit.retired_by.username if audit.retired_by else "someone"
            raise UserError(
                f"audit {audit.pk} was retired on {audit.retired_at:%Y-%m-%d} by {by} ({audit.retired_reason}): a "
                "retired audit is no longer relied on, so it is not compared; audit the file again and compare "
                "that audit",
                field=field,
            )
    if champion.sha256 != challenger.sha256:
        raise UserError(
            f"audit {challenger.pk} audited {challenger.original_name} (SHA-256 {_short(challenger.sha256)}), audit "
            f"{champion.pk} {champion.original_name} (SHA-256 {_short(champion.sha256)}): two audits are paired only "
            "when they audited the same file",
            field="challenger_audit",
        )


def _reference_document(audit: PredictionAudit) -> dict[str, Any] | None:
    document = verdict_documents_of_audit(audit=audit).order_by("frozen_at", "id").first()
    return None if document is None else {"id": document.pk, "sha256": document.sha256}


def comparison_create_from_audits(
    *,
    user: User,
    champion: PredictionAudit,
    challenger: PredictionAudit,
    source: Path | None,
    original_name: str,
    sha256: str | None = None,
    power: float = stats.DEFAULT_POWER,
    metrics: Sequence[str] = paired.METRICS,
    limits: tabular.ReadLimits | None = None,
    web: bool = False,
) -> PairedComparison:
    """Compare the models of two audits (``champion`` and ``challenger``, already scoped to ``user``)
    on ``source``, the file both audited, given again; store the result with its verdict document.

    Refused, naming the field (UserError): ``challenger_audit`` for the same audit twice, audits of
    different files, or audits that read another label, other attributes or unknown values, or the
    very same predictions; the audit's own field for a retired audit, or for a model whose counts in
    the file differ from its audit's; ``file`` for no file, or a file whose SHA-256 is not the audits'.
    Judged under the active fairness policy, as a comparison of one file is. ``web``: in a web request
    the file must be one an audit would run in the request (AUDIT_INLINE_MAX_SIZE).
    """
    rules.check_create(user)
    check_audits(champion=champion, challenger=challenger)
    policy = policy_active()
    models = [AuditedModel(audit.pk, audit.parameters, audit.result) for audit in (champion, challenger)]
    spec = paired_audits.outputs_spec(
        models[0], models[1], tolerance=policy.tolerance, alpha=policy.alpha, power=power, metrics=metrics
    )
    if source is None or not source.is_file():
        raise UserError(
            f"give the file both audits audited ({champion.original_name}, SHA-256 {_short(champion.sha256)}): an "
            "audit keeps per-group counts, not the rows, so the file is needed again",
            field="file",
        )
    tabular.check_file_name(original_name)
    if web:
        if not prediction_audit_runs_inline(source=source):
            raise UserError(
                "the file is too large to compare in a web request; compare it with manage.py compare_predictions "
                "--champion-audit A --challenger-audit B FILE",
                field="file",
            )
        limits = limits or inline_read_limits()
    digest = sha256 or tabular.file_sha256(source)
    if digest != champion.sha256:
        raise UserError(
            f"{original_name} has SHA-256 {_short(digest)}, not the file audits {champion.pk} and {challenger.pk} "
            f"audited ({champion.original_name}, SHA-256 {_short(champion.sha256)}): give that file, byte for byte",
            field="file",
        )
    try:
        outcome = compare_outputs(
            source,
            spec,
            display_name=original_name,
            max_bytes=settings.DATASET_MAX_UPLOAD_BYTES,
            sha256=digest,
            policy=policy.as_document(),
            limits=limits or dataset_read_limits(),
        )
    except DatasetError as error:
        # A model's column names its audit; anything else is the file's.
        error.field = dict(zip(MODELS, AUDIT_FIELDS, strict=True)).get(str(error.field), "file")
        raise
    for role, model, field in zip(MODELS, models, AUDIT_FIELDS, strict=True):
        mismatches = paired_audits.marginal_mismatches(outcome, model, role)
        if mismatches:
            raise UserError(paired_audits.mismatch_message(model.audit_id, mismatches), field=field)
    references = {
        role: paired_audits.audit_reference(model, output, document=_reference_document(audit))
        for role, model, output, audit in zip(
            MODELS, models, (spec.champion, spec.challenger), (champion, challenger), strict=True
        )
    }
    document = outcome.document
    for role in MODELS:
        document[role] = {**document[role], **references[role]}
    document["source"] = ComparisonSource.AUDITS.value
    parameters = {
        "source": ComparisonSource.AUDITS.value,
        "champion_audit": references["champion"],
        "challenger_audit": references["challenger"],
        "label": spec.label,
        "positive": spec.positive,
        "attributes": list(spec.attributes),
        "unknown_tokens": list(spec.unknown_tokens),
        "tolerance": policy.tolerance,
        "alpha": policy.alpha,
        "power": power,
        "metrics": list(spec.metrics),
    }
    return paired_comparison_store(
        user=user,
        original_name=original_name,
        outcome=outcome,
        document=document,
        policy=policy,
        champion=spec.champion.name,
        challenger=spec.challenger.name,
        parameters=parameters,
        event={"champion_audit": champion.pk, "challenger_audit": challenger.pk},
        source=ComparisonSource.AUDITS,
        champion_audit=champion,
        challenger_audit=challenger,
    )
