"""A stand-in for ``python -m trainer.train`` with the same command line and metrics file.

It writes deterministic metrics (schema 1) without training anything, so the local backend's
process handling and ingestion can be tested in seconds. Behaviour is set through the environment,
which the local backend passes on to trial processes:

- ``FAKE_TRAINER_SLEEP``: seconds to sleep after each reported step (default 0); or, per trial
  folder, ``trial-2=0.15,trial-4=0.15`` (the others do not sleep): only a trial that a search should
  stop part-way need train slowly enough for the stop to reach it.
- ``FAKE_TRAINER_POINTS``: extra per-group counts per validation line (default 0).
- ``FAKE_TRAINER_CRASH``: a trial folder name (``trial-2``) that crashes after its first validation.
- ``FAKE_TRAINER_CELLS``: when set, every confusion cell per gender group (fn, fp, tn too), so the
  validations can be judged (verdicts, frozen documents).
- Under ``torch.distributed.run`` (``slots_per_trial`` > 1) every process writes
  ``rank-<RANK>.json`` in its working folder (its rank, world size and Determined's port variables)
  and only rank 0 writes the metrics file, as the real trainer's chief does.
- ``FAKE_TRAINER_OBJECTIVES``: ``trial-1=0.5,trial-2=0.9``: a trial folder's fair_objective (less a
  ten-thousandth per batch), so a search's ranking is the test's choice.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def metrics_for(trial: int, step: int, extra: int, cells: bool = False) -> dict[str, float]:
    base = (trial % 7) / 100 + step / 10_000
    metrics = {
        "eod": round(0.2 - base, 6),
        "fair_objective": round(0.7 - base, 6),
        "accuracy": round(0.6 + base, 6),
        "val_loss": round(0.5 - base, 6),
        "recall/gender/female": round(0.5 + base, 6),
        "recall/gender/male": round(0.7 + base, 6),
        "count/gender/female/tp": float(10 + step),
        "count/gender/male/tp": float(20 + step),
        "eod/gender": round(0.2 - base, 6),
    }
    if cells:
        for group, offset in (("female", 10), ("male", 20)):
            metrics |= {f"count/gender/{group}/fn": 5.0, f"count/gender/{group}/fp": 4.0}
            metrics[f"count/gender/{group}/tn"] = float(offset + 30)
    for index in range(extra):
        metrics[f"count/synthetic/g{index}/tp"] = float(index + step)
    return metrics


def sleep_for(folder: str, setting: str) -> float:
    """FAKE_TRAINER_SLEEP for the trial in ``folder``: one number for every trial, or per folder."""
    if "=" not in setting:
        return float(setting or 0)
    per_trial = dict(item.split("=", 1) for item in setting.split(",") if "=" in item)
    return float(per_trial.get(folder, 0))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--hparams")
    parser.add_argument("--batches", type=int, required=True)
    parser.add_argument("--validation-period", type=int)
    parser.add_argument("--metrics-out", type=Path, required=True)
    parser.add_argument("--trial-id", type=int, default=1)
    args = parser.parse_args()
    if not (Path(args.data) / "manifest.json").is_file():
        print(f"no shards in {args.data}", file=sys.stderr)
        return 2
    rank = int(os.environ.get("RANK", "0"))
    if "RANK" in os.environ:
        seen = {name: os.environ.get(name) for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
        seen |= {name: os.environ.get(name) for name in os.environ if name.startswith("INTER_TRAIN_PROCESS_COMM")}
        Path(f"rank-{rank}.json").write_text(json.dumps(seen))
    if rank != 0:
        return 0
    period = args.validation_period or args.batches
    extra = int(os.environ.get("FAKE_TRAINER_POINTS", "0"))
    folder = Path(os.environ.get("RUN_DIR", "")).name
    sleep = sleep_for(folder, os.environ.get("FAKE_TRAINER_SLEEP", ""))
    crash = os.environ.get("FAKE_TRAINER_CRASH", "") == folder
    objectives = dict(
        item.split("=", 1) for item in os.environ.get("FAKE_TRAINER_OBJECTIVES", "").split(",") if "=" in item
    )
    steps = list(range(period, args.batches + 1, period))
    if not steps or steps[-1] != args.batches:
        steps.append(args.batches)
    args.metrics_out.write_text("")
    for step in steps:
        with args.metrics_out.open("a") as handle:
            line = {"schema": 1, "trial": args.trial_id, "kind": "training", "step": step, "metrics": {"loss": 0.5}}
            handle.write(json.dumps(line) + "\n")
            metrics = metrics_for(args.trial_id, step, extra, cells=bool(os.environ.get("FAKE_TRAINER_CELLS")))
            if folder in objectives:
                metrics["fair_objective"] = round(float(objectives[folder]) - step / 10_000, 6)
            line = {"schema": 1, "trial": args.trial_id, "kind": "validation", "step": step, "metrics": metrics}
            handle.write(json.dumps(line) + "\n")
        print(f"fake trainer: step {step} of {args.batches}", flush=True)
        if crash:
            print("Traceback (most recent call last):\nRuntimeError: fake trainer crashed on purpose", file=sys.stderr)
            return 3
        time.sleep(sleep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
