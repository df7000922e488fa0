"""Two prediction audits of the same file, compared as that file's two models (docs/comparisons.md,
"Two audits").

Pure (no Django). An audit keeps its parameters and its per-group confusion counts, not its rows, so
which rows its model got right is lost with the file. Given the file again (the caller has checked
that its SHA-256 is the one both audits recorded), each audit's parameters say how its model's
predictions were taken (a prediction column, or a score column at a threshold, with a frozen
what-if's group thresholds): :func:`outputs_spec` takes them exactly so, after checking that the two
audits read the same label, attributes and unknown values. :func:`marginal_mismatches` then holds
each model's own counts, as the paired comparison counted them, to the counts its audit recorded:
the same file read the same way must give the same numbers, and anything else is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from auditportal.fairness.files.intersections import attribute_key
from auditportal.fairness.files.tabular import DEFAULT_UNKNOWN_TOKENS
from auditportal.fairness.files.tabular.spec import MAX_STORED_NAME
from auditportal.fairness.statistics import paired, stats
from auditportal.fairness.statistics.paired_file import MODELS, ModelOutput, OutputsSpec, PairedOutcome, model_counts

JSON = dict[str, Any]
FIELDS: Final = {"champion": "champion_audit", "challenger": "challenger_audit"}
# Mismatched counts named in a refusal (the rest are counted).
MISMATCHES_SHOWN: Final = 5


@dataclass(frozen=True)
class AuditedModel:
    """One audit as it was stored: its id, its parameters (the spec it ran with) and its document."""

    audit_id: int
    parameters: Mapping[str, Any]
    document: Mapping[str, Any]


def _field(role: str) -> str:
    return FIELDS[role]


def model_name(audit_id: int, output: ModelOutput) -> str:
    """What the comparison calls an audit's model: ``audit 12 (score)``, within the database's limit."""
    column = output.column
    room = MAX_STORED_NAME - len(f"audit {audit_id} ()")
    if len(column) > room:
        column = column[: room - 1] + "…"
    return f"audit {audit_id} ({column})"


def model_output(model: AuditedModel, role: str) -> ModelOutput:
    """How ``model``'s audit took its predictions: its prediction column, or its score column at its
    threshold and, for an audit frozen from a what-if, its groups' thresholds."""
    parameters = model.parameters
    prediction = str(parameters.get("prediction") or "") or None
    score = str(parameters.get("score") or "") or None
    threshold = parameters.get("threshold")
    if (prediction is None) == (score is None) or (score is not None and threshold is None):
        raise paired.PairedInputError(
            _field(role),
            f"audit {model.audit_id} does not record a prediction column or a score column with its threshold",
        )
    overrides = parameters.get("thresholds") or {}
    groups = overrides.get("groups") or {}
    return ModelOutput(
        name="",
        prediction=prediction,
        score=score,
        threshold=None if threshold is None else float(threshold),
        override_attribute=str(overrides.get("attribute")) if groups else None,
        override_groups=tuple(sorted((str(group), float(value)) for group, value in groups.items())),
    )


def _population(model: AuditedModel, role: str) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    parameters = model.parameters
    label = str(parameters.get("label") or "")
    attributes = tuple(str(name) for name in parameters.get("attributes") or ())
    if not label or not attributes:
        raise paired.PairedInputError(
            _field(role), f"audit {model.audit_id} does not record its label and attributes; audit the file again"
        )
    positive = str(parameters.get("positive", "1")).strip()
    tokens = parameters.get("unknown_tokens")
    given = DEFAULT_UNKNOWN_TOKENS if tokens is None else tokens
    unknown = tuple(sorted({str(token).strip().lower() for token in given} | {""}))
    return label, positive, attributes, unknown


def _listed(names: Sequence[str]) -> str:
    return ", ".join(repr(name) for name in names)


def outputs_spec(
    champion: AuditedModel,
    challenger: AuditedModel,
    *,
    tolerance: float,
    alpha: float,
    power: float = stats.DEFAULT_POWER,
    metrics: Sequence[str] = paired.METRICS,
) -> OutputsSpec:
    """The paired comparison of two audits' models on their file: refused (PairedInputError, field
    ``challenger_audit``) when the two audits did not read the same label (column and positive value),
    the same attributes or the same unknown values, or took the very same predictions."""
    a_label, a_positive, a_attributes, a_unknown = _population(champion, "champion")
    b_label, b_positive, b_attributes, b_unknown = _population(challenger, "challenger")
    a, b = f"audit {champion.audit_id}", f"audit {challenger.audit_id}"
    field = _field("challenger")
    if (a_label, a_positive) != (b_label, b_positive):
        raise paired.PairedInputError(
            field,
            f"{b} took label {b_label!r} with positive value {b_positive!r}, {a} label {a_label!r} with positive "
            f"value {a_positive!r}: two audits are paired only on the same label",
        )
    if sorted(a_attributes) != sorted(b_attributes):
        raise paired.PairedInputError(
            field,
            f"{b} declared the attributes {_listed(b_attributes)}, {a} {_listed(a_attributes)}: two audits are "
            "paired only on the same attributes",
        )
    if a_unknown != b_unknown:
        raise paired.PairedInputError(
            field,
            f"{b} treated {_listed(b_unknown)} as unknown, {a} {_listed(a_unknown)}: with other unknown values "
            "the groups differ, so the audits are not paired",
        )
    outputs = [model_output(champion, "champion"), model_output(challenger, "challenger")]
    if outputs[0].same_predictions(outputs[1]):
        raise paired.PairedInputError(
            field,
            f"{b} took the same predictions as {a} (column {outputs[0].column!r}, the same threshold): there is "
            "nothing to compare",
        )
    named = [
        dataclasses.replace(output, name=model_name(model.audit_id, output))
        for output, model in zip(outputs, (champion, challenger), strict=True)
    ]
    groups = [int(model.parameters.get("max_groups") or 50) for model in (champion, challenger)]
    spec = OutputsSpec(
        label=a_label,
        attributes=a_attributes,
        champion=named[0],
        challenger=named[1],
        positive=a_positive,
        unknown_tokens=a_unknown,
        tolerance=tolerance,
        alpha=alpha,
        power=power,
        metrics=tuple(metrics),
        max_groups=max(groups),
    )
    paired._check_levels(tolerance=tolerance, alpha=alpha, power=power, metrics=spec.metrics)
    return spec


def marginal_mismatches(outcome: PairedOutcome, model: AuditedModel, role: str) -> list[str]:
    """Where ``role``'s own counts in the paired comparison differ from what its audit recorded: the
    rows, positives and predicted positives, and per attribute its groups, unknown rows and each
    group's tp, fn, fp and tn. Empty when every count agrees."""
    document = model.document
    found: list[str] = []

    def differs(what: str, now: object, recorded: object) -> None:
        if now != recorded:
            found.append(f"{what}: {now} in the file, {recorded} recorded")

    differs("rows", outcome.num_rows, document.get("rows"))
    differs("label positives", outcome.positives, (document.get("label") or {}).get("positives"))
    predicted = outcome.predicted_positives[MODELS.index(role)]
    differs("predicted positives", predicted, (document.get("prediction") or {}).get("predicted_positives"))
    sections = document.get("attributes") or {}
    for name, (groups, cells, unknown) in outcome.tables.items():
        section = sections.get(attribute_key([name])) or sections.get(name)
        if section is None:
            found.append(f"attribute {name!r}: not in the audit's document")
            continue
        recorded_groups = section.get("groups") or {}
        if list(groups) != list(recorded_groups):
            found.append(f"{name!r} groups: {_listed(groups)} in the file, {_listed(list(recorded_groups))} recorded")
            continue
        differs(f"{name!r} unknown rows", unknown, section.get("unknown"))
        counts = model_counts(cells, role)
        for group, row in zip(groups, np.asarray(counts).tolist(), strict=True):
            stored = recorded_groups[group]
            for cell, value in zip(("tp", "fn", "fp", "tn"), row, strict=True):
                differs(f"{name!r} = {group!r} {cell}", int(value), stored.get(cell))
    return found


def mismatch_message(audit_id: int, mismatches: Sequence[str]) -> str:
    shown = "; ".join(mismatches[:MISMATCHES_SHOWN])
    more = f"; and {len(mismatches) - MISMATCHES_SHOWN} more" if len(mismatches) > MISMATCHES_SHOWN else ""
    return (
        f"the file's counts for audit {audit_id}'s model differ from the counts the audit recorded ({shown}{more}): "
        "its predictions could not be taken as the audit took them, so nothing was compared"
    )


def audit_reference(model: AuditedModel, output: ModelOutput, *, document: Mapping[str, Any] | None) -> JSON:
    """What a comparison's result records of one audit (beside the model's column and threshold)."""
    return {
        "audit": model.audit_id,
        "prediction": output.prediction,
        "score": output.score,
        **(
            {"thresholds": {"attribute": output.override_attribute, "groups": dict(output.override_groups)}}
            if output.override_groups
            else {}
        ),
        "audit_sha256": (model.document.get("file") or {}).get("sha256"),
        "verdict": model.document.get("verdict"),
        "policy": (model.document.get("policy") or {}).get("version"),
        "document": None if document is None else dict(document),
    }
