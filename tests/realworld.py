"""Small generated stand-ins for the real-world files of issue 13: a recidivism-like file that
repeats two column names, a label with a single value, an attribute whose every value is unknown, a
group value longer than the database stores and a field longer than the CSV reader's block."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

# As in the widely used recidivism file: decile_score and priors_count appear twice.
RECIDIVISM_HEADER = [
    "id", "sex", "race", "age", "decile_score", "priors_count", "two_year_recid", "high_risk", "decile_score",
    "priors_count",
]  # fmt: skip
REPEATED_WARNING = (
    "the file has more than one column named 'decile_score' (columns 5 and 9), 'priors_count' (columns 6 and 10); "
    "these were not used (as label, sensitive attribute, prediction, score or feature): a repeated name is used "
    "only where it is declared and its columns hold the same values in every row, and a dataset's default "
    "features leave it out"
)
IDENTICAL_DECILE = "columns 5 and 9 are both named 'decile_score' with identical values; the first is used"
IDENTICAL_PRIORS = "columns 6 and 10 are both named 'priors_count' with identical values; the first is used"
# The repeated name left out when only decile_score is used.
UNUSED_PRIORS = REPEATED_WARNING.replace("'decile_score' (columns 5 and 9), ", "")
UNUSED_DECILE = REPEATED_WARNING.replace(", 'priors_count' (columns 6 and 10)", "")
# recidivism_csv(differ=True): the second decile_score column differs from the first in this data row.
DIFFERING_ROW = 3


def recidivism_rows(rows: int = 120, seed: int = 13, *, differ: bool = False) -> list[list[object]]:
    draw = random.Random(seed)
    out: list[list[object]] = []
    for i in range(rows):
        decile = draw.randint(1, 10)
        priors = draw.randint(0, 12)
        out.append(
            [
                i + 1,
                draw.choice(["Male", "Female"]),
                draw.choice(["African-American", "Caucasian", "Hispanic", "Other"]),
                draw.randint(18, 70),
                decile,
                priors,
                int(draw.random() < 0.2 + 0.05 * decile),
                int(decile >= 5),
                decile % 10 + 1 if differ and i + 1 == DIFFERING_ROW else decile,
                priors,
            ]
        )
    return out


def recidivism_csv(path: Path, rows: int = 120, *, differ: bool = False) -> Path:
    """The file repeats decile_score and priors_count with identical values, or (``differ``) with
    decile_score's second column different in data row DIFFERING_ROW."""
    data = recidivism_rows(rows, differ=differ)
    lines = [",".join(RECIDIVISM_HEADER)] + [",".join(str(v) for v in row) for row in data]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def recidivism_parquet(path: Path, rows: int = 120, *, differ: bool = False) -> Path:
    data = recidivism_rows(rows, differ=differ)
    arrays: list[pa.Array[Any]] = [pa.array([row[i] for row in data]) for i in range(len(RECIDIVISM_HEADER))]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_arrays(arrays, names=RECIDIVISM_HEADER), path)
    return path


def write_rows(path: Path, header: str, rows: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n" + "".join(row + "\n" for row in rows), encoding="utf-8")
    return path


def single_value_label_csv(path: Path) -> Path:
    """Every row's label is 0: no positives in the whole file."""
    return write_rows(path, "income,gender,approved,pred", [f"{i},{'fm'[i % 2]},0,{i % 2}" for i in range(20)])


def all_unknown_attribute_csv(path: Path) -> Path:
    values = ["", "unknown", "-1", "Unknown"]
    rows = [f"{i},{'fm'[i % 2]},{values[i % 4]},{i % 2},{(i // 2) % 2}" for i in range(20)]
    return write_rows(path, "income,gender,race,approved,pred", rows)


LONG_GROUP = "g" * 300


def long_group_csv(path: Path, value: str = LONG_GROUP, row: int = 7) -> Path:
    """``value`` is the gender of data row ``row`` (1-based); the others are f or m."""
    rows = [f"{i},{value if i == row else 'fm'[i % 2]},{i % 2},{(i // 2) % 2}" for i in range(1, 21)]
    return write_rows(path, "income,gender,approved,pred", rows)


def long_field_csv(path: Path, field_bytes: int, row: int = 4) -> Path:
    """A free-text ``notes`` column whose value in data row ``row`` is ``field_bytes`` long."""
    rows = [
        f"{i},{'fm'[i % 2]},{'x' * field_bytes if i == row else 'short'},{i % 2},{(i // 2) % 2}" for i in range(1, 11)
    ]
    return write_rows(path, "income,gender,notes,approved,pred", rows)
