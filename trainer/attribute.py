"""Per-row feature attributions of a trained checkpoint on a stratified sample of its validation rows.

    python -m trainer.attribute --data SHARDS --checkpoint DIR --hparams JSON --sample-size N --seed S --out FILE.npz

Same ``--data``/``--checkpoint``/``--hparams`` as :mod:`trainer.predict`: the validation rows are the ones
training held out (:func:`trainer.data.validation_mask` with the trial's ``val_fraction``). At most N of
them are drawn, stratified by every monitored attribute's group (seeded by S), and explained with
Integrated Gradients (Sundararajan et al. 2017) of the positive class's probability. The npz layout
is trainer/README.md's "Attributions file"; exit status 2 and one line on stderr on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

ATTRIBUTIONS_SCHEMA = 1


def stratified_sample(codes: np.ndarray, group_counts: list[int], size: int, seed: int) -> np.ndarray:
    """Sorted indices of at most ``size`` rows, every group of every attribute represented.

    ``codes`` is [n, S] (one column per monitored attribute, unknown = that attribute's group count).
    Each group is kept whole up to a floor of ``min(group size, max(30, size // (4 * groups)))`` rows;
    the rest of the sample is drawn uniformly from the remaining rows. Deterministic in ``seed``.
    """
    raise NotImplementedError


def attribute_validation(
    data: Path, checkpoint: Path, hparams: dict[str, Any], *, sample_size: int, seed: int
) -> dict[str, np.ndarray]:
    """The arrays of the attributions file (trainer/README.md), keyed as np.savez writes them."""
    raise NotImplementedError


def main(argv: list[str] | None = None) -> int:
    raise NotImplementedError


if __name__ == "__main__":
    sys.exit(main())
