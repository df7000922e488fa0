from __future__ import annotations

import csv
from pathlib import Path

import pytest

from auditportal.datasets.models import DatasetVersion

SMALL_CSV = """income,region,gender,age_group,approved
52000,north,female,18-29,1
48000,south,male,30-44,0
61000,north,female,30-44,1
39000,west,,45-64,0
75000,south,male,18-29,1
42000,west,unknown,30-44,0
58000,north,female,45-64,0
66000,south,male,45-64,1
"""


@pytest.fixture
def small_csv(tmp_path: Path) -> Path:
    path = tmp_path / "incoming" / "loans.csv"
    path.parent.mkdir()
    path.write_text(SMALL_CSV, encoding="utf-8")
    return path


def flip_labels(version: DatasetVersion) -> None:
    """Tamper with a registered version's stored file: swap its 0/1 labels in place, as someone
    with access to the store could, leaving everything else (and the database) as it was."""
    path = version.path
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    column = rows[0].index(version.label_column)
    for row in rows[1:]:
        row[column] = {"0": "1", "1": "0"}[row[column]]
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)
