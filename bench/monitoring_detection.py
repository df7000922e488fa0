"""How fast the production monitor confirms a real breach, beside how often it raises a false one.

    .venv/bin/python bench/monitoring_detection.py [--runs 2000] [--batches 200] [--batch 500] [--seed 0]

One group's false-negative rate against a limit of 5% ("FNR at most 5%"), judged after every batch
of ``--batch`` predictions, the group being 20% of the rows and 30% of its rows positives (so about
30 of the group's positives per batch), over a horizon of ``--batches`` batches, in ``--runs`` seeded
deployments. The monitor's alpha is 0.05, judged alone (K = 1) and as one of K = 12 comparisons (say
FNR, FPR and selection rate for 4 groups: each at 0.05/12).

Scenarios: the FNR is 8% from the first batch; or 3% (as approved) for 100 batches, then 8%, counted
since promotion or in tumbling windows of 50 batches (alpha spent as 6/(pi^2 k^2) of it on the k-th).
The compliant model keeps its FNR at 3%, or exactly at the limit (5%, the hardest case): how many
deployments ever see a false breach over the horizon. Beside it, the naive monitor: the audit's
fixed-level Wilson interval at each look (the same alpha per comparison), which nothing corrects for
looking 250 times.

Batches to detection: the first batch after which the confidence sequence lies entirely above 5%.
Deployments not detected within the horizon count as later than every detected one, so the median
and quartiles stay honest ("> horizon" when more than that share was never detected).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditportal.fairness.statistics import stats
from auditportal.fairness.statistics.sequential import MixturePrior, confidence_sequence_bounds, window_alpha

LIMIT = 0.05
ALPHA = 0.05
GROUP_SHARE = 0.2
POSITIVE_SHARE = 0.3
SHIFT_AT = 100
WINDOW = 50

Ints = npt.NDArray[np.int64]


def simulate(rng: np.random.Generator, fnr: npt.NDArray[np.float64], *, runs: int, batch: int) -> tuple[Ints, Ints]:
    """Per run and batch: the group's positives and false negatives (FNR per batch given)."""
    rows = rng.binomial(batch, GROUP_SHARE, size=(runs, len(fnr)))
    positives = rng.binomial(rows, POSITIVE_SHARE)
    misses = rng.binomial(positives, fnr)
    return positives, misses


def first_breach(
    positives: Ints, misses: Ints, *, comparisons: int, windowed: bool, naive: bool = False
) -> npt.NDArray[np.float64]:
    """Per run, the 1-based batch of the first confirmed breach; inf when none in the horizon."""
    batches = positives.shape[1]
    if windowed:
        window = np.arange(batches) // WINDOW  # 0-based window of each batch
        first = np.broadcast_to(window * WINDOW, positives.shape)
        trials, successes = (_since(np.cumsum(counts, axis=1), first) for counts in (positives, misses))
        alpha = np.array([window_alpha(ALPHA, int(k) + 1) for k in window]) / comparisons
    else:
        trials, successes = np.cumsum(positives, axis=1), np.cumsum(misses, axis=1)
        alpha = np.full(batches, ALPHA / comparisons)
    if naive:
        low, _high = stats.wilson_interval(successes, trials, alpha)
        low = np.nan_to_num(low, nan=0.0)
    else:
        # The prior depends only on the limit and the comparison's alpha (fixed before the data).
        a = np.array([MixturePrior.tuned(LIMIT, alpha=float(level)).a for level in alpha])
        b = np.array([MixturePrior.tuned(LIMIT, alpha=float(level)).b for level in alpha])
        low, _high = confidence_sequence_bounds(successes, trials, alpha=alpha, a=a, b=b)
    breach = low > LIMIT
    return np.where(breach.any(axis=1), breach.argmax(axis=1) + 1, np.inf)


def _since(cumulative: Ints, first: Ints) -> Ints:
    """Cumulative counts restarted at each run's batch ``first`` (0-based)."""
    before = np.concatenate([np.zeros((len(cumulative), 1), np.int64), cumulative[:, :-1]], axis=1)
    restarted: Ints = cumulative - np.take_along_axis(before, first, axis=1)
    return restarted


def quartiles(detected: npt.NDArray[np.float64], batches: int) -> str:
    cells = []
    for q in (0.25, 0.5, 0.75):
        value = np.quantile(detected, q, method="inverted_cdf")
        cells.append(f"> {batches}" if np.isinf(value) else f"{value:.0f}")
    found = np.isfinite(detected).mean()
    return f"median {cells[1]:>6}  quartiles {cells[0]:>5} - {cells[2]:<6} detected {found:6.1%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=250)
    parser.add_argument("--batch", type=int, default=500, help="predictions per batch (all groups)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    horizon = args.batches
    per_batch = args.batch * GROUP_SHARE * POSITIVE_SHARE
    print(
        f"FNR limit {LIMIT:.0%}; batches of {args.batch:,} predictions, group share {GROUP_SHARE:.0%}, "
        f"positives {POSITIVE_SHARE:.0%} (about {per_batch:.0f} of the group's positives a batch); "
        f"horizon {horizon} batches; {args.runs:,} seeded runs per line; monitor alpha {ALPHA}"
    )
    flat: dict[float | str, npt.NDArray[np.float64]] = {rate: np.full(horizon, rate) for rate in (0.03, 0.05, 0.08)}
    late = np.where(np.arange(horizon) < SHIFT_AT, 0.03, 0.08)
    scenarios: dict[float | str, npt.NDArray[np.float64]] = {**flat, "late": late}
    data = {name: simulate(rng, fnr, runs=args.runs, batch=args.batch) for name, fnr in scenarios.items()}
    for comparisons in (1, 12):
        allowed = ALPHA / comparisons
        se = (allowed * (1 - allowed) / args.runs) ** 0.5
        print(f"\nK = {comparisons} comparisons (each at alpha {allowed:.4g})")
        for label, windowed, naive in (
            ("confidence sequence, since promotion", False, False),
            (f"confidence sequence, windows of {WINDOW}", True, False),
            ("naive Wilson at every look", False, True),
        ):
            print(f"  {label}")
            for rate in (0.03, 0.05):
                hits = first_breach(*data[rate], comparisons=comparisons, windowed=windowed, naive=naive)
                rate_false = np.isfinite(hits).mean()
                print(
                    f"    compliant FNR {rate:.0%}: false alarm in {rate_false:6.2%} of deployments "
                    f"(allowed {allowed:.2%} for this comparison, simulation SE {se:.2%})"
                )
            detected = first_breach(*data[0.08], comparisons=comparisons, windowed=windowed, naive=naive)
            print(f"    FNR 8% from batch 1:   batches to detection {quartiles(detected, horizon)}")
            late_hits = first_breach(*data["late"], comparisons=comparisons, windowed=windowed, naive=naive)
            after = np.where(np.isfinite(late_hits), late_hits - SHIFT_AT, np.inf)
            early = np.mean(late_hits <= SHIFT_AT)
            print(
                f"    3% then 8% after batch {SHIFT_AT}: batches after the shift {quartiles(after, horizon - SHIFT_AT)}"
                f" (alarm before the shift: {early:.2%})"
            )
    print(f"\n{time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
