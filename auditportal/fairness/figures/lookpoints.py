"""What the deployment page's charts draw of one look, as a compact row of numbers (docs/monitoring.md,
"The deployment page").

A look stores its judgements as JSON (``LookJudgement.as_json()`` per attribute, 15 kB for two
attributes); parsing a year of hourly looks takes seconds. :func:`look_points` picks out of one look's
judgements exactly the values the charts draw and gives them as

- ``layout``: compact JSON ``{"v": 1, "lines": [[kind, attribute, metric, qualifier, group], ...]}``,
  one entry per line the look draws: ``rate`` (qualifier the bound, ``at_most``/``at_least``),
  ``gap`` (qualifier the reference group), ``share`` (metric ``share``, qualifier ``unseen`` for a
  group the training data never had, ``unknown`` for the rows of unknown group, else empty);
- ``values``: float64 bytes, line after line, the :data:`FIELDS` of its kind each; NaN where the
  judgement has no value; a status as its index in :data:`STATUSES` (NaN: none).

``look_write`` stores both with the look, the migration that added them back-fills them from the same
function, and :func:`points_lines` reads many looks back at numpy speed (looks of one layout are one
``np.frombuffer``). Pure: no Django, no plotly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

LAYOUT_VERSION: Final = 1
# A status's code is its index here: append only (stored looks keep their codes).
STATUSES: Final = ("breach", "watching", "within", "too_few", "unseen")
FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "rate": ("estimate", "low", "high", "limit", "boundary", "status"),
    "gap": ("difference", "low", "high", "limit", "status"),
    "share": ("production_share", "training_share", "low", "high", "limit", "status"),
}
_CODES: Final = {status: float(code) for code, status in enumerate(STATUSES)}

LineKey = tuple[str, str, str, str, str]  # kind, attribute, metric, qualifier, group
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class LookPoints:
    layout: str
    values: bytes


def _number(value: Any) -> float:
    return float("nan") if value is None or isinstance(value, bool) else float(value)


def _status(value: Any) -> float:
    return _CODES.get(value, float("nan")) if isinstance(value, str) else float("nan")


def look_lines(judgements: Mapping[str, Any]) -> list[tuple[LineKey, list[float]]]:
    """Each line one look's ``judgements`` draw, with its values (:data:`FIELDS` of its kind)."""
    lines: list[tuple[LineKey, list[float]]] = []
    for attribute, judgement in judgements.items():
        if not isinstance(judgement, Mapping):
            continue
        for rate in judgement.get("rates") or ():
            key: LineKey = ("rate", attribute, str(rate["metric"]), str(rate["bound"]), str(rate["group"]))
            values = [_number(rate.get(name)) for name in FIELDS["rate"][:-1]]
            lines.append((key, [*values, _status(rate.get("status"))]))
        for gap in judgement.get("gaps") or ():
            key = ("gap", attribute, str(gap["metric"]), str(gap["reference"]), str(gap["group"]))
            values = [_number(gap.get(name)) for name in FIELDS["gap"][:-1]]
            lines.append((key, [*values, _status(gap.get("status"))]))
        drift = judgement.get("drift") or {}
        limit = _number(drift.get("limit"))
        for share in drift.get("findings") or ():
            production = share.get("production") or {}
            qualifier = "unknown" if share.get("unknown") else "unseen" if share.get("status") == "unseen" else ""
            key = ("share", attribute, "share", qualifier, "unknown" if share.get("unknown") else str(share["group"]))
            values = [
                _number(share.get("production_share")),
                _number(share.get("training_share")),
                _number(production.get("low")),
                _number(production.get("high")),
                limit,
                _status(share.get("status")),
            ]
            lines.append((key, values))
    return lines


def look_points(judgements: Mapping[str, Any]) -> LookPoints:
    """The values one look's charts draw (the module's docstring says how they are laid out)."""
    lines = look_lines(judgements)
    layout = json.dumps({"v": LAYOUT_VERSION, "lines": [list(key) for key, _ in lines]}, separators=(",", ":"))
    values = np.array([value for _, line in lines for value in line], dtype="<f8")
    return LookPoints(layout=layout, values=values.tobytes())


@dataclass(frozen=True)
class PointLine:
    """One line over the looks: ``seq`` ascending, and per field of its kind the values at each."""

    key: LineKey
    seq: npt.NDArray[np.int64]
    values: dict[str, Floats]


def points_lines(rows: Iterable[tuple[int, str, bytes | memoryview]]) -> list[PointLine]:
    """Every line of the looks ``rows`` (seq, layout, values) in the order they first appear, each
    read across the layouts its looks have (a group that came and went)."""
    by_layout: dict[str, tuple[list[int], list[bytes | memoryview]]] = {}
    for seq, layout, values in rows:
        seqs, blobs = by_layout.setdefault(layout, ([], []))
        seqs.append(seq)
        blobs.append(values)
    pieces: dict[LineKey, list[tuple[npt.NDArray[np.int64], Floats]]] = {}
    for layout, (seqs, blobs) in by_layout.items():
        lines = [tuple(line) for line in json.loads(layout)["lines"]]
        widths = [len(FIELDS[line[0]]) for line in lines]
        width = sum(widths)
        matrix = np.frombuffer(b"".join(blobs), dtype="<f8")
        if matrix.size != width * len(blobs):
            raise ValueError(f"look points of {len(blobs)} looks hold {matrix.size} values, not {width} each")
        matrix = matrix.reshape(len(blobs), width)
        at = 0
        seq_array = np.asarray(seqs, dtype=np.int64)
        for line, line_width in zip(lines, widths, strict=True):
            pieces.setdefault(line, []).append((seq_array, matrix[:, at : at + line_width]))  # type: ignore[arg-type]
            at += line_width
    made = []
    for key, parts in pieces.items():
        if len(parts) == 1:
            line_seq, block = parts[0]
        else:
            line_seq = np.concatenate([part[0] for part in parts])
            block = np.concatenate([part[1] for part in parts])
            order = np.argsort(line_seq, kind="stable")
            line_seq, block = line_seq[order], block[order]
        made.append(PointLine(key, line_seq, {name: block[:, index] for index, name in enumerate(FIELDS[key[0]])}))
    return made


def status_names(codes: Floats) -> list[str | None]:
    """Status codes back as their names (None where NaN)."""
    return [None if np.isnan(code) else STATUSES[int(code)] for code in codes]
