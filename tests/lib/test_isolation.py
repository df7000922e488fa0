"""lib/isolation: a function run in a child process under CPU, memory and wall-clock limits. The
functions below are module-level so that the child can import them; nothing here needs the database."""

from __future__ import annotations

import time

import pytest

from auditportal.lib.isolation import ChildFailed, LimitExceeded, Limits, run_limited

GIB = 1024**3
LIMITS = Limits(cpu_seconds=1, memory_bytes=GIB, wall_seconds=30)


def add(a: int, b: int) -> int:
    return a + b


def spin() -> None:
    while True:
        pass


def wait() -> None:
    time.sleep(60)


def allocate() -> bytes:
    return b"x" * (4 * GIB)


def fail() -> None:
    raise ValueError("no such thing")


def test_the_result_comes_back() -> None:
    assert run_limited(add, 2, 3, limits=LIMITS) == 5


def test_a_function_past_its_cpu_time_is_stopped() -> None:
    with pytest.raises(LimitExceeded) as stopped:
        run_limited(spin, limits=LIMITS)
    assert stopped.value.kind == "time"


def test_a_function_past_the_wall_clock_is_killed() -> None:
    with pytest.raises(LimitExceeded) as stopped:
        run_limited(wait, limits=Limits(cpu_seconds=10, memory_bytes=GIB, wall_seconds=0.5))
    assert stopped.value.kind == "time"


def test_a_function_past_its_memory_is_stopped() -> None:
    with pytest.raises(LimitExceeded) as stopped:
        run_limited(allocate, limits=LIMITS)
    assert stopped.value.kind == "memory"


def test_an_exception_is_named() -> None:
    with pytest.raises(ChildFailed, match="ValueError: no such thing"):
        run_limited(fail, limits=LIMITS)
