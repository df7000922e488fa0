from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def paired_csv_text(rows: int = 2000, seed: int = 1) -> str:
    """Two models on the same rows: the challenger (model_b) is right more often for group f."""
    rng = np.random.default_rng(seed)
    gender = rng.choice(["f", "m"], rows)
    label = rng.integers(0, 2, rows)
    a = np.where(rng.random(rows) < 0.75, label, 1 - label)
    b = np.where(rng.random(rows) < np.where(gender == "f", 0.9, 0.75), label, 1 - label)
    score_a = np.clip(a * 0.5 + rng.random(rows) * 0.5, 0, 1)
    score_b = np.clip(b * 0.5 + rng.random(rows) * 0.5, 0, 1)
    lines = ["label,model_a,model_b,score_a,score_b,gender"]
    lines += [f"{label[i]},{a[i]},{b[i]},{score_a[i]:.4f},{score_b[i]:.4f},{gender[i]}" for i in range(rows)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def paired_csv(tmp_path: Path) -> Path:
    path = tmp_path / "incoming" / "paired.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(paired_csv_text(), encoding="utf-8")
    return path
