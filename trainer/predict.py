"""A trained checkpoint's predictions on its validation rows (no Determined, no Django).

    python -m trainer.predict --data SHARDS --checkpoint DIR --hparams JSON --out FILE.npz

Loads the model a trial saved (``state_dict.pth``, Determined's PyTorchTrial layout), splits the
shards exactly as training did (:func:`trainer.data.validation_mask` with the trial's
``val_fraction``) and writes, per validation row in shard order: its part and row in part, the
target, the group codes of every monitored attribute and the prediction at 0.5 (the threshold of
the bias monitor). The portal pairs two trials' files row by row (comparisons, docs/comparisons.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainer.checkpoint import load_model, monitored_attributes, validation_rows
from trainer.data import ShardError
from trainer.hparams import HparamError, resolve_hparams

PREDICTIONS_SCHEMA = 1


def validation_predictions(data: Path, checkpoint: Path, hparams: dict[str, Any]) -> dict[str, Any]:
    hp = resolve_hparams(hparams)
    spec, _, val = validation_rows(data, hp)
    model = load_model(checkpoint, spec, hp)
    predicted = np.zeros(len(val), dtype=np.int8)
    batch = max(1, int(hp["val_batch_size"]))
    with torch.no_grad():
        for start in range(0, len(val), batch):
            logits = model(
                torch.from_numpy(np.ascontiguousarray(val.numeric[start : start + batch])),
                torch.from_numpy(np.ascontiguousarray(val.categorical[start : start + batch])),
            )
            predicted[start : start + batch] = (torch.sigmoid(logits) >= 0.5).numpy()
    attributes = [{"name": name, "groups": groups} for name, groups in monitored_attributes(spec)]
    return {
        "part": val.part.astype(np.int32),
        "row": val.row_in_part.astype(np.int64),
        "target": val.target.astype(np.int8),
        "codes": val.codes.astype(np.int32),
        "predicted": predicted,
        "meta": json.dumps(
            {"schema": PREDICTIONS_SCHEMA, "val_fraction": float(hp["val_fraction"]), "attributes": attributes}
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.predict", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the trial's shard directory")
    parser.add_argument("--checkpoint", type=Path, required=True, help="the trial's checkpoint folder")
    parser.add_argument("--hparams", required=True, help="the trial's hyperparameters: a JSON object")
    parser.add_argument("--out", type=Path, required=True, help="where to write the predictions (.npz)")
    args = parser.parse_args(argv)
    try:
        arrays = validation_predictions(args.data, args.checkpoint, json.loads(args.hparams))
    except (ShardError, HparamError, OSError, KeyError, RuntimeError) as exc:
        print(f"trainer.predict: {exc}", file=sys.stderr)
        return 2
    with args.out.open("wb") as fh:
        np.savez(fh, **arrays)
    return 0


if __name__ == "__main__":
    sys.exit(main())
