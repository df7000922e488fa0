"""The suite's speed check: a test not marked ``slow`` whose call takes longer than a few seconds fails.

The suite stays fast as it grows only if a slow test is a decision: mark it ``slow`` (``make test-fast``
leaves it out; ``make test`` and CI still run it) or make it fast. The limit is on the call phase (the
test's own body); fixtures are measured by ``--durations``, and the expensive ones are built once per
session.

``PORTAL_TEST_TIME_LIMIT`` sets the limit in seconds (default 10; 0 turns the check off). On a loaded
machine wall times stretch, so the limit is multiplied by the machine's load per core (the 1-minute
load average over the cores) when that is above 1: 10 s on an idle machine, 20 s while twice as many
processes as cores want to run. Tests running in parallel on every core (``make test``) make a load of
about 1 per core, so the allowance grows only with what else the machine runs. Ten seconds, not
five: CI runs the suite on two shared cores, where a test that takes 4 s alone can take 8 s beside
its neighbours, and a speed check that fails a correct test by chance would cost a whole run.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

LIMIT_ENV = "PORTAL_TEST_TIME_LIMIT"
DEFAULT_LIMIT_SECONDS = 10.0
LIMIT_KEY = pytest.StashKey[float]()


def limit_seconds() -> float:
    """The configured limit before the load allowance; 0 when the check is off."""
    raw = os.environ.get("PORTAL_TEST_TIME_LIMIT", "").strip()
    if not raw:
        return DEFAULT_LIMIT_SECONDS
    try:
        limit = float(raw)
    except ValueError:
        raise pytest.UsageError(f"{LIMIT_ENV}={raw!r} is not a number of seconds (0 turns the check off)") from None
    if limit < 0:
        raise pytest.UsageError(f"{LIMIT_ENV}={raw!r} is negative (0 turns the check off)")
    return limit


def load_per_core() -> float:
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        return 1.0


def allowed_seconds(limit: float, load: float) -> float:
    return limit * max(1.0, load)


def over_limit_message(nodeid: str, duration: float, allowed: float, limit: float, load: float) -> str:
    stretched = f" ({limit:g} s times the load per core, {load:.1f})" if allowed > limit else ""
    return (
        f"{nodeid} took {duration:.1f} s, over the {allowed:.1f} s limit{stretched} for a test not marked slow: "
        f"mark it slow (@pytest.mark.slow) or make it fast. {LIMIT_ENV} sets the limit (0 turns the check off)."
    )


def pytest_configure(config: pytest.Config) -> None:
    # Read once: a bad value stops the run before any test, with its message.
    config.stash[LIMIT_KEY] = limit_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, object, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.passed or item.get_closest_marker("slow") is not None:
        return
    limit = item.config.stash.get(LIMIT_KEY, DEFAULT_LIMIT_SECONDS)
    if limit == 0 or report.duration <= limit:
        return
    load = load_per_core()
    allowed = allowed_seconds(limit, load)
    if report.duration > allowed:
        report.outcome = "failed"
        report.longrepr = over_limit_message(item.nodeid, report.duration, allowed, limit, load)
