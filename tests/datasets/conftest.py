from __future__ import annotations

from pathlib import Path

import pytest

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
