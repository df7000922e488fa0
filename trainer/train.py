"""Determined entry point; with :mod:`trainer.trial`, the only module of trainer/ that imports Determined.

Locally (Determined local training mode):
    python -m trainer.train --data DIR --hparams JSON --batches N [--validation-period M] \
        --metrics-out FILE.jsonl [--trial-id ID] [--dataset-sha256 HEX]
Two CPU workers: ``torchrun --nproc_per_node=2 -m trainer.train ...`` (gloo).
On a cluster: ``python3 -m determined.launch.torch_distributed python3 -m trainer.train ...``
(see const.yaml / search.yaml); hyperparameters then come from the experiment.

The arguments, the shards' dataset hash, the hyperparameters, the shards and the model's size are
refused before torch and Determined's PyTorch API are imported (about 2 s of CPU): a refusal takes a
fraction of a second. The trial itself is :mod:`trainer.trial`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from trainer.data import ShardError, check_dataset_sha256, load_shards
from trainer.hparams import HparamError, check_model_size, input_width, resolve_hparams


def _load_hparams(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    candidate = Path(text)
    if not text.lstrip().startswith("{") and candidate.exists():
        text = candidate.read_text()
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("--hparams must be a JSON object")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m trainer.train", description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="shard directory written by shard_dataset")
    p.add_argument(
        "--dataset-sha256",
        default=None,
        help="refuse to train unless the shards' manifest names this dataset hash (dataset.sha256)",
    )
    p.add_argument("--hparams", help="JSON object or path to a JSON file (local mode only)")
    p.add_argument("--batches", type=int, required=True, help="training length in batches")
    p.add_argument("--validation-period", type=int, default=None, help="batches between validations")
    p.add_argument("--reporting-period", type=int, default=None, help="batches between training metrics")
    p.add_argument("--metrics-out", type=Path, default=None, help="JSONL metrics file (chief only)")
    p.add_argument("--trial-id", type=int, default=1, help="trial id written into the metrics file")
    args = p.parse_args(argv)
    if args.batches < 1:
        p.error("--batches must be positive")
    return args


def _refuse(exc: HparamError) -> int:
    print(f"trainer: refused hyperparameters: {exc.message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dataset_sha256:
        try:
            check_dataset_sha256(args.data, args.dataset_sha256)
        except ShardError as exc:
            print(f"trainer: refused shards: {exc}", file=sys.stderr)
            return 2
    import determined as det  # its package only: torch comes with determined.pytorch (trainer.trial)

    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    # Resuming on torch >= 2.6 meets numpy RNG state in the checkpoint (see DETERMINED.md).
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    info = det.get_cluster_info()
    on_cluster = info is not None and info.task_type == "TRIAL"
    given = dict(info.trial.hparams) if on_cluster and info is not None else _load_hparams(args.hparams)
    try:
        hparams = resolve_hparams(given)
    except HparamError as exc:
        return _refuse(exc)
    shards = load_shards(args.data)
    spec = shards[0]
    try:
        # Only the data tells the model's exact input width; the model checks it again (model.py).
        width = input_width(len(spec.numeric), spec.cardinalities, int(hparams["embedding_dim"]))
        check_model_size(hparams["hidden_sizes"], normalization=str(hparams["normalization"]), input_width=width)
    except HparamError as exc:
        return _refuse(exc)
    from trainer import trial  # torch and Determined's PyTorch API

    if on_cluster:
        assert info is not None
        trial_id, latest_checkpoint = info.trial.trial_id, info.latest_checkpoint
    else:
        trial_id, latest_checkpoint = args.trial_id, None
    refused = trial.fit(
        args, hparams, shards, on_cluster=on_cluster, trial_id=trial_id, latest_checkpoint=latest_checkpoint
    )
    return _refuse(refused) if refused is not None else 0


if __name__ == "__main__":
    sys.exit(main())
