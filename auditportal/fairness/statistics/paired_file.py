"""Compare two models' predictions read from one CSV/Parquet file (champion and challenger columns).

Pure pyarrow/numpy (no Django). Reading and the label's and attributes' checks are the prediction
audit's (:func:`read_columns`, :func:`decode_labelled`), and so are the checks of a prediction or
score column (``audit._predictions``, ``audit._scores_at_threshold``): a 0/1 (or label-coded)
prediction, or a score at a threshold. Both models are counted in one numpy pass per attribute into
the eight joint cells (label, A, B) per group that :mod:`paired` compares.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from auditportal.fairness.files.tabular import (
    DEFAULT_UNKNOWN_TOKENS,
    NO_LIMITS,
    DatasetError,
    DatasetSpec,
    ReadLimits,
    decode_labelled,
    read_columns,
)
from auditportal.fairness.statistics import audit, paired, stats

JSON = dict[str, Any]
MODELS = ("champion", "challenger")


@dataclass(frozen=True)
class PairedSpec:
    """What to compare: two prediction columns, or two score columns each with its threshold."""

    label: str
    attributes: tuple[str, ...]
    champion: str
    challenger: str
    positive: str = "1"
    # "prediction" (0/1 or label-coded columns) or "score" (numbers, each model at its threshold).
    output: str = "prediction"
    champion_threshold: float | None = None
    challenger_threshold: float | None = None
    unknown_tokens: tuple[str, ...] = DEFAULT_UNKNOWN_TOKENS
    tolerance: float = stats.DEFAULT_TOLERANCE
    alpha: float = stats.DEFAULT_ALPHA
    power: float = stats.DEFAULT_POWER
    metrics: tuple[str, ...] = paired.METRICS
    max_groups: int = 50

    @classmethod
    def from_input(
        cls,
        *,
        label: str,
        attributes: str | Sequence[str],
        champion: str | None,
        challenger: str | None,
        positive: str = "1",
        output: str = "prediction",
        champion_threshold: float | None = None,
        challenger_threshold: float | None = None,
        unknown_tokens: str | Sequence[str] | None = None,
        tolerance: float = stats.DEFAULT_TOLERANCE,
        alpha: float = stats.DEFAULT_ALPHA,
        power: float = stats.DEFAULT_POWER,
        metrics: Sequence[str] = paired.METRICS,
    ) -> PairedSpec:
        base = audit.AuditSpec.from_input(label=label, attributes=attributes, unknown_tokens=unknown_tokens)
        return cls(
            label=base.label,
            attributes=base.attributes,
            champion=(champion or "").strip(),
            challenger=(challenger or "").strip(),
            positive=positive.strip(),
            output=(output or "prediction").strip(),
            champion_threshold=champion_threshold,
            challenger_threshold=challenger_threshold,
            unknown_tokens=base.unknown_tokens,
            tolerance=tolerance,
            alpha=alpha,
            power=power,
            metrics=tuple(metrics),
        )

    def check(self) -> None:
        field = paired.PairedInputError
        if not self.label:
            raise field("label", "name the label column")
        if not self.champion:
            raise field("champion", "name the champion's column: the model in production (A)")
        if not self.challenger:
            raise field("challenger", "name the challenger's column: a paired comparison needs two models")
        if self.champion == self.challenger:
            raise field(
                "challenger", f"{self.challenger!r} is also the champion's column; compare two different columns"
            )
        if self.output not in ("prediction", "score"):
            raise field("output", f"the models' output is 'prediction' or 'score', not {self.output!r}")
        for model in MODELS:
            threshold = getattr(self, f"{model}_threshold")
            if self.output == "score" and threshold is None:
                raise field(
                    f"{model}_threshold",
                    f"the {model}'s score needs a threshold: rows scoring at least it are predicted positive",
                )
            if self.output == "prediction" and threshold is not None:
                raise field(f"{model}_threshold", "a threshold applies to score columns, not to 0/1 predictions")
            if threshold is not None and not math.isfinite(threshold):
                raise field(f"{model}_threshold", f"the threshold must be a finite number, not {threshold}")
        if not self.attributes:
            raise field("attributes", "declare at least one sensitive attribute column")
        repeated = sorted({name for name in self.attributes if self.attributes.count(name) > 1})
        if repeated:
            raise field("attributes", f"{', '.join(map(repr, repeated))} declared more than once as an attribute")
        for model in MODELS:
            column = getattr(self, model)
            if column == self.label:
                raise field(model, f"{column!r} is the label column; the {model}'s output must be a separate column")
            if column in self.attributes:
                raise field(model, f"{column!r} is a sensitive attribute; the {model}'s output must be its own column")
        if self.label in self.attributes:
            raise field("attributes", f"{self.label!r} cannot be both the label and a sensitive attribute")
        paired._check_levels(tolerance=self.tolerance, alpha=self.alpha, power=self.power, metrics=self.metrics)

    def parameters(self) -> JSON:
        values = asdict(self)
        for key in ("attributes", "unknown_tokens", "metrics"):
            values[key] = list(values[key])
        return values


@dataclass(frozen=True)
class PairedOutcome:
    document: JSON
    file_format: str
    num_rows: int
    sha256: str
    size_bytes: int


def compare_predictions(
    path: Path,
    spec: PairedSpec,
    *,
    display_name: str,
    max_bytes: int,
    sha256: str | None = None,
    policy: JSON | None = None,
    limits: ReadLimits = NO_LIMITS,
) -> PairedOutcome:
    """Compare the champion's and the challenger's predictions in ``path``; raise DatasetError (file
    problems; ``field`` is "champion" or "challenger" when their column is at fault) or
    PairedInputError."""
    spec.check()
    columns_spec = DatasetSpec(
        label=spec.label,
        positive=spec.positive,
        attributes=spec.attributes,
        unknown_tokens=spec.unknown_tokens,
        features=(),
        max_groups=spec.max_groups,
    )
    others = [(spec.champion, f"champion's {spec.output}"), (spec.challenger, f"challenger's {spec.output}")]
    try:
        raw = read_columns(
            path,
            columns_spec,
            others=others,
            display_name=display_name,
            max_bytes=max_bytes,
            sha256=sha256,
            limits=limits,
        )
        columns = decode_labelled(raw, columns_spec, others=others, display_name=display_name)
        predicted = [_model_output(columns.others[getattr(spec, model)], spec, model, display_name) for model in MODELS]
    except DatasetError as error:
        _name_the_model(error, spec)
        raise
    label = np.asarray(columns.target, dtype=np.int64)
    tables: dict[str, tuple[Sequence[str], paired.Counts, int]] = {}
    for info, codes in zip(columns.attributes, columns.codes, strict=True):
        size = len(info.groups)
        cells = paired.joint_cells(label, predicted[0], predicted[1], codes, size)
        unknown = int(np.count_nonzero((np.asarray(codes) < 0) | (np.asarray(codes) >= size)))
        tables[info.name] = (list(info.groups), cells, unknown)
    result = paired.compare(tables, tolerance=spec.tolerance, alpha=spec.alpha, power=spec.power, metrics=spec.metrics)
    agree = int(np.count_nonzero(predicted[0] == predicted[1]))
    document: JSON = {
        **result,
        "file": {"name": display_name, "format": raw.file_format, "sha256": raw.sha256, "size_bytes": raw.size_bytes},
        "rows": raw.table.num_rows,
        "label": {"column": spec.label, "positive": spec.positive, "positives": int(label.sum())},
        "champion": {"column": spec.champion, "threshold": spec.champion_threshold},
        "challenger": {"column": spec.challenger, "threshold": spec.challenger_threshold},
        "output": spec.output,
        "agreement": agree / raw.table.num_rows if raw.table.num_rows else None,
        **({"policy": dict(policy)} if policy is not None else {}),
    }
    return PairedOutcome(
        document=document,
        file_format=raw.file_format,
        num_rows=raw.table.num_rows,
        sha256=raw.sha256,
        size_bytes=raw.size_bytes,
    )


def _model_output(column: Any, spec: PairedSpec, model: str, display_name: str) -> np.ndarray[Any, Any]:
    name = getattr(spec, model)
    if spec.output == "score":
        threshold = float(getattr(spec, f"{model}_threshold"))
        return audit._scores_at_threshold(column, threshold, display_name, name)
    return audit._predictions(column, spec.positive, display_name, name)


def _name_the_model(error: DatasetError, spec: PairedSpec) -> None:
    """A column error about a model's column names the form field (champion/challenger), not the column."""
    for model in MODELS:
        if error.column is not None and error.column == getattr(spec, model):
            error.field = model
            return
