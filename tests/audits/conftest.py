from __future__ import annotations

from pathlib import Path

import pytest

# 12 rows: gender f/m plus 2 unknown (empty, "unknown"); age_group young/old.
PREDICTIONS_CSV = """label,pred,score,gender,age_group
1,1,0.91,f,young
1,0,0.40,f,old
0,0,0.10,f,young
0,1,0.65,f,old
1,1,0.80,m,young
1,1,0.72,m,old
0,0,0.30,m,young
0,0,0.20,m,old
0,1,0.55,m,young
1,1,0.99,,young
0,0,0.05,unknown,old
1,0,0.45,f,young
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def predictions_csv(tmp_path: Path) -> Path:
    return write(tmp_path / "incoming" / "scores.csv", PREDICTIONS_CSV)
