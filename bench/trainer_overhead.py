"""Bias-monitor overhead: train+validate throughput with the monitor on vs off, in one process.

    .venv/bin/python bench/trainer_overhead.py [--rows 20000] [--batches 1000] [--validation-period 200]
                                               [--batch-size 256] [--repeat 5]

Runs Determined's local training mode (CPU) on a synthetic shard directory, alternating
``bias_monitor: true`` and ``false`` runs (on, off, off, on, ...) so machine noise hits both alike,
and compares the median CPU time of this process during ``Trainer.fit`` (training, validations,
final checkpoint) - CPU time, because on a shared 2-core machine wall time mostly measures the
neighbours; wall time is printed too. Torch runs single-threaded (``--threads``) for the same reason.
"Off" keeps loss/accuracy/AUC but drops the per-group validation cells and the worker-share window.
Target: <= 3% on CPU.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--validation-period", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=6, help="runs per setting")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="trainer-overhead-"))
    os.environ["XDG_DATA_HOME"] = str(work / "xdg")  # checkpoints, before determined is imported
    cwd = work / "cwd"  # Determined copies the cwd into every checkpoint: keep it empty
    cwd.mkdir()
    os.chdir(cwd)
    logging.disable(logging.WARNING)

    import torch
    from determined import pytorch

    from tests.trainer.trainer_testkit import make_demo_frame, stratified_assignment, write_shard_dir
    from trainer.train import BiasTrial, resolve_hparams

    torch.set_num_threads(args.threads)
    frame = make_demo_frame(args.rows, seed=0)
    shards = write_shard_dir(frame, work / "shards", stratified_assignment(frame, 2))

    def run(monitor: bool) -> tuple[float, float]:
        hp = resolve_hparams({"global_batch_size": args.batch_size, "bias_monitor": monitor, "seed": 0})
        with pytorch.init(hparams=hp, enable_tensorboard_logging=False) as context:
            trial = BiasTrial(context, shards, hp)
            trainer = pytorch.Trainer(trial, context)
            start, cpu_start = time.perf_counter(), time.process_time()
            trainer.fit(
                max_length=pytorch.Batch(args.batches),
                validation_period=pytorch.Batch(args.validation_period),
                reporting_period=pytorch.Batch(args.validation_period),
                checkpoint_policy="none",
            )
            return time.process_time() - cpu_start, time.perf_counter() - start

    run(True)  # warm-up: imports, allocator, first checkpoint directory
    cpu: dict[bool, list[float]] = {True: [], False: []}
    wall: dict[bool, list[float]] = {True: [], False: []}
    order = [True, False, False, True] * ((args.repeat + 1) // 2)
    for monitor in order[: 2 * args.repeat]:
        c, w = run(monitor)
        cpu[monitor].append(c)
        wall[monitor].append(w)

    on, off = statistics.median(cpu[True]), statistics.median(cpu[False])
    won, woff = statistics.median(wall[True]), statistics.median(wall[False])
    examples = args.batches * args.batch_size
    print(
        f"{args.rows:,} rows, {args.batches} batches of {args.batch_size}, validation every "
        f"{args.validation_period}, {args.repeat} runs each, torch threads {torch.get_num_threads()}"
    )
    for name, c, w, runs in (("on ", on, won, cpu[True]), ("off", off, woff, cpu[False])):
        listed = ", ".join(f"{r:.2f}" for r in runs)
        print(
            f"  monitor {name}: CPU {c:.2f} s ({examples / c:,.0f} training examples/CPU-s), "
            f"wall {w:.2f} s; CPU runs {listed}"
        )
    print(f"monitor overhead: {(on / off - 1) * 100:.1f}% (on {on:.2f} s vs off {off:.2f} s CPU; target <= 3%)")
    print(f"wall-time overhead (noisy on a shared machine): {(won / woff - 1) * 100:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
