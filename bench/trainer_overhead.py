"""Bias-monitor overhead: train+validate throughput with the monitor on vs off, in one process.

    .venv/bin/python bench/trainer_overhead.py [--rows 20000] [--batch-size 256] [--validation-period 200]
                                               [--cycles 20] [--fit-runs 4] [--fit-batches 1000]

Primary measure: one trial (trainer.trial.BiasTrial inside Determined's local-mode context) runs
*cycles* of ``--validation-period`` training batches followed by one full validation pass and
its cross-worker reduction to metrics, alternating monitor on / off cycle by cycle. "Off" skips the
worker-share window and the per-group validation cells (loss/accuracy/AUC remain). CPU time of this
process per cycle; the overhead is taken from the fastest cycle of each kind and, as a check, from
the median of the on/off ratios of adjacent cycles - both far more robust to neighbours on a shared
machine than whole-run wall times. The "noise floor" line compares the off cycles with each other
(an A/A test): an overhead below it is not resolved by this run.

Secondary measure (``--fit-runs``): whole ``Trainer.fit`` runs per setting (ABBA order), fastest
and median CPU time - includes Determined's own per-batch work and the final checkpoint, but is
noisy on a shared machine.
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--validation-period", type=int, default=200, help="training batches per cycle")
    parser.add_argument("--cycles", type=int, default=40, help="cycles per setting")
    parser.add_argument("--fit-runs", type=int, default=6, help="whole Trainer.fit runs per setting (0: skip)")
    parser.add_argument("--fit-batches", type=int, default=1000)
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
    from trainer import bias
    from trainer.hparams import resolve_hparams
    from trainer.trial import BiasTrial

    torch.set_num_threads(args.threads)
    frame = make_demo_frame(args.rows, seed=0)
    shards = write_shard_dir(frame, work / "shards", stratified_assignment(frame, 2))
    examples_per_cycle = args.validation_period * args.batch_size
    print(
        f"{args.rows:,} rows ({int(args.rows * 0.2):,} validation), batch {args.batch_size}, "
        f"validation every {args.validation_period} batches, torch threads {torch.get_num_threads()}"
    )

    hp = resolve_hparams({"global_batch_size": args.batch_size, "seed": 0})
    with pytorch.init(hparams=hp, enable_tensorboard_logging=False) as context:
        trial = BiasTrial(context, shards, hp)
        context._current_batch_idx = 0
        train_batches = iter(trial.build_training_data_loader().get_data_loader(repeat=True))
        val_batches = list(trial.build_validation_data_loader())
        window = trial.share_window
        reducer = trial.val_reducer
        acc_on = reducer.acc
        acc_off = bias.ConfusionAccumulator(None, context.device)

        def cycle(monitor: bool) -> float:
            trial.share_window = window if monitor else None
            trial.monitor = monitor
            reducer.acc = acc_on if monitor else acc_off
            batches = [next(train_batches) for _ in range(args.validation_period)]
            start = time.process_time()
            trial.model.train()
            for i, batch in enumerate(batches):
                trial.train_batch(batch, 0, i)
            if window is not None and monitor:
                # What the training reducer does at each report: gather and turn into metrics.
                bias.worker_share_metrics([window.state()], trial.layout)
            trial.model.eval()
            reducer.reset()
            with torch.no_grad():
                for i, batch in enumerate(val_batches):
                    trial.evaluate_batch(batch, i)
            metrics: dict[str, Any] = reducer.cross_slot_reduce([reducer.per_slot_reduce()])
            assert ("eod" in metrics) == monitor
            return time.process_time() - start

        cycle(True)
        cycle(False)  # warm-up
        times: dict[bool, list[float]] = {True: [], False: []}
        for i in range(args.cycles):
            for monitor in (True, False) if i % 2 == 0 else (False, True):
                times[monitor].append(cycle(monitor))

    best_on, best_off = min(times[True]), min(times[False])
    ratios = [on / off for on, off in zip(times[True], times[False], strict=True)]
    off_a, off_b = min(times[False][0::2]), min(times[False][1::2])
    print(f"cycles ({args.cycles} per setting, CPU time per cycle of train + validate):")
    print(f"  monitor on : fastest {best_on:.3f} s ({examples_per_cycle / best_on:,.0f} training examples/s)")
    print(f"  monitor off: fastest {best_off:.3f} s ({examples_per_cycle / best_off:,.0f} training examples/s)")
    print(
        f"monitor overhead: {(best_on / best_off - 1) * 100:.1f}% (on {best_on:.3f} s vs off {best_off:.3f} s; "
        f"median of adjacent on/off ratios {(statistics.median(ratios) - 1) * 100:.1f}%; target <= 3%)"
    )
    print(f"noise floor (off vs off, alternate cycles): {(max(off_a, off_b) / min(off_a, off_b) - 1) * 100:.1f}%")

    if args.fit_runs > 0:
        fit_times: dict[bool, list[float]] = {True: [], False: []}

        def fit(monitor: bool) -> float:
            hp_fit = resolve_hparams({"global_batch_size": args.batch_size, "bias_monitor": monitor, "seed": 0})
            with pytorch.init(hparams=hp_fit, enable_tensorboard_logging=False) as ctx:
                trainer = pytorch.Trainer(BiasTrial(ctx, shards, hp_fit), ctx)
                start = time.process_time()
                trainer.fit(
                    max_length=pytorch.Batch(args.fit_batches),
                    validation_period=pytorch.Batch(args.validation_period),
                    reporting_period=pytorch.Batch(args.validation_period),
                    checkpoint_policy="none",
                )
                return time.process_time() - start

        for monitor in ([True, False, False, True] * args.fit_runs)[: 2 * args.fit_runs]:
            fit_times[monitor].append(fit(monitor))
        on, off = min(fit_times[True]), min(fit_times[False])
        med_on, med_off = statistics.median(fit_times[True]), statistics.median(fit_times[False])
        print(
            f"whole Trainer.fit ({args.fit_batches} batches, {args.fit_runs} runs each, CPU): fastest on {on:.2f} s "
            f"vs off {off:.2f} s = {(on / off - 1) * 100:+.1f}%; medians {(med_on / med_off - 1) * 100:+.1f}% "
            f"(noisy: on {', '.join(f'{t:.2f}' for t in fit_times[True])}; "
            f"off {', '.join(f'{t:.2f}' for t in fit_times[False])})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
