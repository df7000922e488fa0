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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from auditportal.fairness.files.intersections import attribute_key, group_values
from auditportal.fairness.files.tabular import (
    DEFAULT_UNKNOWN_TOKENS,
    NO_LIMITS,
    DatasetError,
    DatasetSpec,
    LabelledColumns,
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
class ModelOutput:
    """How one model's predictions are taken from the file, as a prediction audit takes them: a 0/1
    (or label-coded) ``prediction`` column, or a ``score`` column at ``threshold``, which may be
    overridden for groups of one attribute or of the intersection (``override_attribute``, its key in
    an audit document, and ``override_groups``: an audit frozen from a what-if, docs/whatif.md). A row
    takes its group's threshold, else the global one; a row whose group there is unknown the global one."""

    name: str  # what the comparison calls the model (a file's column, or "audit 12 (score >= 0.5)")
    prediction: str | None = None
    score: str | None = None
    threshold: float | None = None
    override_attribute: str | None = None
    override_groups: tuple[tuple[str, float], ...] = ()

    @property
    def column(self) -> str:
        return cast(str, self.prediction or self.score)

    @property
    def output(self) -> str:
        return "prediction" if self.prediction else "score"

    def same_predictions(self, other: ModelOutput) -> bool:
        """Whether ``other`` takes the very same predictions (same column, threshold and overrides)."""
        return (self.prediction, self.score, self.threshold, self.override_attribute, self.override_groups) == (
            other.prediction,
            other.score,
            other.threshold,
            other.override_attribute,
            other.override_groups,
        )


@dataclass(frozen=True)
class OutputsSpec:
    """Two models' outputs in one file, each taken its own way (:class:`ModelOutput`), on the same
    label, attributes and unknown values."""

    label: str
    attributes: tuple[str, ...]
    champion: ModelOutput
    challenger: ModelOutput
    positive: str = "1"
    unknown_tokens: tuple[str, ...] = DEFAULT_UNKNOWN_TOKENS
    tolerance: float = stats.DEFAULT_TOLERANCE
    alpha: float = stats.DEFAULT_ALPHA
    power: float = stats.DEFAULT_POWER
    metrics: tuple[str, ...] = paired.METRICS
    max_groups: int = 50


@dataclass(frozen=True)
class PairedOutcome:
    document: JSON
    file_format: str
    num_rows: int
    sha256: str
    size_bytes: int
    # Per attribute (keyed as in ``document``): its groups, the (G, 8) joint cells and the unknown rows;
    # each model's own confusion counts follow from them (:func:`model_counts`).
    tables: dict[str, tuple[list[str], paired.Counts, int]] = field(default_factory=dict)
    positives: int = 0
    predicted_positives: tuple[int, int] = (0, 0)


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
    score = spec.output == "score"
    outputs = OutputsSpec(
        label=spec.label,
        attributes=spec.attributes,
        champion=ModelOutput(
            name=spec.champion,
            prediction=None if score else spec.champion,
            score=spec.champion if score else None,
            threshold=spec.champion_threshold,
        ),
        challenger=ModelOutput(
            name=spec.challenger,
            prediction=None if score else spec.challenger,
            score=spec.challenger if score else None,
            threshold=spec.challenger_threshold,
        ),
        positive=spec.positive,
        unknown_tokens=spec.unknown_tokens,
        tolerance=spec.tolerance,
        alpha=spec.alpha,
        power=spec.power,
        metrics=spec.metrics,
        max_groups=spec.max_groups,
    )
    return compare_outputs(
        path, outputs, display_name=display_name, max_bytes=max_bytes, sha256=sha256, policy=policy, limits=limits
    )


def compare_outputs(
    path: Path,
    spec: OutputsSpec,
    *,
    display_name: str,
    max_bytes: int,
    sha256: str | None = None,
    policy: JSON | None = None,
    limits: ReadLimits = NO_LIMITS,
) -> PairedOutcome:
    """Compare two models' outputs in ``path``, each taken as its :class:`ModelOutput` says. A column
    error names the model (``field`` "champion" or "challenger"; the champion's when both read it)."""
    paired._check_levels(tolerance=spec.tolerance, alpha=spec.alpha, power=spec.power, metrics=spec.metrics)
    columns_spec = DatasetSpec(
        label=spec.label,
        positive=spec.positive,
        attributes=spec.attributes,
        unknown_tokens=spec.unknown_tokens,
        features=(),
        max_groups=spec.max_groups,
    )
    models = (spec.champion, spec.challenger)
    # Two audits may read the same score column at two thresholds: it is read once.
    roles: dict[str, str] = {}
    for role, model in zip(MODELS, models, strict=True):
        roles.setdefault(model.column, f"{role}'s {model.output}")
    others = list(roles.items())
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
        predicted = [_model_output(model, columns, spec.positive, display_name) for model in models]
    except DatasetError as error:
        _name_the_model(error, models)
        raise
    label = np.asarray(columns.target, dtype=np.int64)
    tables: dict[str, tuple[list[str], paired.Counts, int]] = {}
    for info, codes in zip(columns.attributes, columns.codes, strict=True):
        size = len(info.groups)
        cells = paired.joint_cells(label, predicted[0], predicted[1], codes, size)
        unknown = int(np.count_nonzero((np.asarray(codes) < 0) | (np.asarray(codes) >= size)))
        tables[info.name] = (list(info.groups), cells, unknown)
    result = paired.compare(tables, tolerance=spec.tolerance, alpha=spec.alpha, power=spec.power, metrics=spec.metrics)
    agree = int(np.count_nonzero(predicted[0] == predicted[1]))
    kinds = {model.output for model in models}
    document: JSON = {
        **result,
        "file": {"name": display_name, "format": raw.file_format, "sha256": raw.sha256, "size_bytes": raw.size_bytes},
        "rows": raw.table.num_rows,
        "label": {"column": spec.label, "positive": spec.positive, "positives": int(label.sum())},
        "champion": {"column": spec.champion.name, "threshold": spec.champion.threshold},
        "challenger": {"column": spec.challenger.name, "threshold": spec.challenger.threshold},
        "output": kinds.pop() if len(kinds) == 1 else MIXED,
        "agreement": agree / raw.table.num_rows if raw.table.num_rows else None,
        **({"policy": dict(policy)} if policy is not None else {}),
    }
    return PairedOutcome(
        document=document,
        file_format=raw.file_format,
        num_rows=raw.table.num_rows,
        sha256=raw.sha256,
        size_bytes=raw.size_bytes,
        tables=tables,
        positives=int(label.sum()),
        predicted_positives=(int(np.count_nonzero(predicted[0])), int(np.count_nonzero(predicted[1]))),
    )


# The document's "output" when one model gives 0/1 predictions and the other scores (two audits).
MIXED = "mixed"


def model_counts(cells: paired.Counts, model: str) -> paired.Counts:
    """One model's ``(G, 4)`` confusion counts (tp, fn, fp, tn) from the ``(G, 8)`` joint cells, whose
    index is ``4 * label + 2 * champion + challenger``: what an audit of that model alone counts."""
    c = np.asarray(cells, dtype=np.int64).reshape(-1, 2, 2, 2)  # label, champion, challenger
    own = c.sum(axis=3) if model == "champion" else c.sum(axis=2)  # (G, label, prediction)
    return np.stack([own[:, 1, 1], own[:, 1, 0], own[:, 0, 1], own[:, 0, 0]], axis=1)


def _model_output(
    model: ModelOutput, columns: LabelledColumns, positive: str, display_name: str
) -> np.ndarray[Any, Any]:
    column = columns.others[model.column]
    if model.prediction:
        return audit._predictions(column, positive, display_name, model.column)
    assert model.threshold is not None
    if not model.override_groups:
        return audit._scores_at_threshold(column, float(model.threshold), display_name, model.column)
    scores = audit.score_values(column, display_name, model.column)
    per_row = _row_thresholds(model, columns, len(scores), display_name)
    predicted: np.ndarray[Any, Any] = np.greater_equal(scores, per_row).view(np.int8)
    return predicted


def _row_thresholds(
    model: ModelOutput, columns: LabelledColumns, rows: int, display_name: str
) -> npt.NDArray[np.float64]:
    """Each row's threshold: its group's override (of one attribute or of the intersection), else the
    global one; rows of an unknown group take the global one, as a what-if does."""
    assert model.threshold is not None
    per_row = np.full(rows, float(model.threshold))
    names = [info.name for info in columns.attributes]
    overrides = dict(model.override_groups)
    key = model.override_attribute
    # A what-if names a declared attribute by its column (docs/whatif.md), the intersection by its key.
    index = next((i for i, name in enumerate(names) if key in (name, attribute_key([name]))), None)
    if index is not None:
        groups = list(columns.attributes[index].groups)
        codes = np.asarray(columns.codes[index])
        for group, value in overrides.items():
            if group not in groups:
                raise DatasetError(
                    f"group {group!r} of {names[index]!r}, which has its own threshold, is not in the file",
                    file=display_name,
                    column=model.column,
                )
            per_row[codes == groups.index(group)] = value
        return per_row
    if key != attribute_key(names):
        raise DatasetError(
            f"the group thresholds are for {key!r}, neither an attribute nor the attributes' intersection",
            file=display_name,
            column=model.column,
        )
    codes_all = [np.asarray(codes) for codes in columns.codes]
    known = np.logical_and.reduce([codes >= 0 for codes in codes_all])
    for group, value in overrides.items():
        values = group_values(group, len(names))
        match = known.copy()
        for info, codes, wanted in zip(columns.attributes, codes_all, values, strict=True):
            if wanted not in info.groups:
                match[:] = False
                break
            match &= codes == list(info.groups).index(wanted)
        per_row[match] = value
    return per_row


def _name_the_model(error: DatasetError, models: Sequence[ModelOutput]) -> None:
    """A column error about a model's column names the form field (champion/challenger), not the column."""
    for role, model in zip(MODELS, models, strict=True):
        if error.column is not None and error.column == model.column:
            error.field = role
            return
