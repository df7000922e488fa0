"""Stopping-based adaptive ASHA, as a Determined 0.38 master runs it, for the local backend. No Django.

Determined's ``adaptive_asha`` searcher (master/pkg/searcher/adaptive_asha.go, asha_stopping.go at
v0.38.1) splits ``max_trials`` over *brackets*, each an asynchronous successive-halving search with
its own number of rungs. A bracket's rung ``i`` of ``n`` needs ``max(max_time / divisor**(n - 1 - i),
1)`` batches (integer part). Each validation a trial reports enters, starting at the trial's
current rung, every rung whose length it has reached: the metric is inserted into the rung's
sorted list of the metrics entered so far (before any equal one), and the trial goes on to the next
rung only if it landed among the first ``max(len // divisor, 1)``; otherwise it is stopped. Entering
the top rung ends the trial (it has trained ``max_time``). A trial that exits early (an error)
counts in its current rung as the worst metric. Decisions are asynchronous: a trial is ranked only
against the trials that entered the rung before it.

This module is the arithmetic; services.py keeps each rung entry (``TrialRung``) so that a decision
is made once and shown on the experiment page.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from auditportal.experiments import configs

MODES = ("aggressive", "standard", "conservative")

CONTINUED = "continued"
STOPPED = "stopped"
COMPLETED = "completed"
EXITED = "exited"


@dataclass(frozen=True)
class Bracket:
    num_rungs: int
    max_trials: int
    max_concurrent_trials: int


@dataclass(frozen=True)
class Decision:
    """The outcome of one metric entering one rung: ``position`` is its 1-based place among the
    ``entered`` metrics of the rung so far, of which the first ``continuing`` go on."""

    outcome: str
    position: int
    entered: int
    continuing: int


def _bracket_rungs(mode: str, max_rungs: int) -> list[int]:
    if mode == "aggressive":
        return [max_rungs]
    if mode == "standard":
        return list(range((max_rungs - 1) // 2 + 1, max_rungs + 1))
    if mode == "conservative":
        return list(range(1, max_rungs + 1))
    raise ValueError(f"unknown adaptive mode {mode!r}: one of {', '.join(MODES)}")


def brackets(
    *, max_trials: int, max_time: int, divisor: float, max_rungs: int, mode: str, max_concurrent_trials: int = 0
) -> list[Bracket]:
    """The brackets of an adaptive_asha search, most rungs (most early stopping) first."""
    if max_trials < 1 or max_time < 1:
        raise ValueError("max_trials and max_time must be positive")
    # Determined's own float arithmetic (int(log(x) / log(divisor)) + 1), rounding included.
    rungs = min(
        max_rungs,
        int(math.log(max_time) / math.log(divisor)) + 1,
        int(math.log(max_trials) / math.log(divisor)) + 1,
    )
    bracket_rungs = sorted(_bracket_rungs(mode, rungs), reverse=True)
    weights = [divisor ** (n - 1) / n for n in bracket_rungs]
    total = sum(weights)
    trials = [max(int(weight / total * max_trials), 1) for weight in weights]
    trials[0] += max(max_trials - sum(trials), 0)
    if max_concurrent_trials == 0:
        concurrent = [max(trials[-1], int(divisor))] * len(trials)
    else:
        budget = max(max_concurrent_trials, len(trials))
        concurrent = [budget // len(trials)] * len(trials)
        for index in range(budget % len(trials)):
            concurrent[index] += 1
    return [Bracket(n, t, c) for n, t, c in zip(bracket_rungs, trials, concurrent, strict=True)]


def search_brackets(*, max_trials: int, max_time: int, max_concurrent_trials: int = 0) -> list[Bracket]:
    """The brackets of the ASHA template's search (its searcher settings: configs.ASHA_*), each with
    its share of ``max_concurrent_trials`` (0: Determined's default)."""
    return brackets(
        max_trials=max_trials,
        max_time=max_time,
        divisor=configs.ASHA_DIVISOR,
        max_rungs=configs.ASHA_MAX_RUNGS,
        mode=configs.ASHA_MODE,
        max_concurrent_trials=max_concurrent_trials,
    )


def trial_brackets(plan: Sequence[Bracket]) -> list[int]:
    """The bracket of each trial in the order Determined creates them: every bracket's first
    ``min(max_concurrent_trials, max_trials)`` trials, bracket by bracket, then the rest of each
    bracket (created as its trials stop), bracket by bracket."""
    first = [min(bracket.max_concurrent_trials, bracket.max_trials) for bracket in plan]
    order = [index for index, count in enumerate(first) for _ in range(count)]
    order += [index for index, bracket in enumerate(plan) for _ in range(bracket.max_trials - first[index])]
    return order


def rung_units(num_rungs: int, divisor: float, max_time: int) -> list[int]:
    """Batches a trial must have trained to enter each rung."""
    return [max(int(max_time / divisor ** (num_rungs - index - 1)), 1) for index in range(num_rungs)]


def decide(entered: Sequence[float], metric: float, *, divisor: float, top: bool) -> Decision:
    """Whether a trial whose searcher metric (smaller is better) is ``metric`` goes on from a rung
    where ``entered`` (in any order) were recorded before it. The caller records ``metric`` after."""
    ranked = sorted(entered)
    index = bisect.bisect_left(ranked, metric)
    count = len(ranked) + 1
    continuing = max(int(count / divisor), 1)
    if top:
        return Decision(COMPLETED, index + 1, count, continuing)
    outcome = CONTINUED if index < continuing else STOPPED
    return Decision(outcome, index + 1, count, continuing)


# What an exited trial counts as in its rung (Determined's ashaExitedMetricValue, math.MaxFloat64).
EXITED_METRIC = 1.7976931348623157e308
