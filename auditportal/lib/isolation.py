"""Running one function on untrusted input in a child process with CPU time, memory and wall-clock
limits (the verification of an uploaded PDF, reports/verification.py).

A thread cannot be stopped and a process's own limits would end the web worker: the function runs in
a child started from a fork server (a clean process started once, not a fork of a threaded web
worker), which sets RLIMIT_CPU and RLIMIT_AS on itself before it calls the function, and is killed
when the wall-clock limit passes. The function, its arguments and its result travel pickled: a
module-level function, and plain values. Nothing here imports Django, so the child does not either.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int
    memory_bytes: int
    # Past this the child is killed whatever it is doing (waiting included).
    wall_seconds: float


class LimitExceeded(Exception):
    """The child used more than its CPU time (``kind`` "time", the wall clock included) or memory."""

    def __init__(self, kind: Literal["time", "memory"]) -> None:
        super().__init__(kind)
        self.kind = kind


class ChildFailed(Exception):
    """The function raised (the message names the exception), or the child died some other way."""


def run_limited(function: Callable[..., T], *args: Any, limits: Limits, preload: Sequence[str] = ()) -> T:
    """``function(*args)`` in a child process under ``limits``; its result, or LimitExceeded or
    ChildFailed. ``preload``: modules the fork server imports once, so that each child need not
    (taken into account when the fork server starts, the first call in this process)."""
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    if preload:
        context.set_forkserver_preload(list(preload))
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(send, function, args, limits), name="limited")
    process.start()
    send.close()
    outcome: tuple[str, Any] | None = None
    timed_out = False
    try:
        if receive.poll(limits.wall_seconds):
            try:
                outcome = receive.recv()
            except EOFError:  # the child died without an answer
                outcome = None
        else:
            timed_out = True
    finally:
        receive.close()
        if not timed_out:
            process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()
    if timed_out:
        raise LimitExceeded("time")
    if outcome is None:
        if process.exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
            raise LimitExceeded("time")
        raise ChildFailed(f"the checking process ended with exit code {process.exitcode}")
    kind, value = outcome
    if kind == "ok":
        result: T = value
        return result
    if kind == "memory":
        raise LimitExceeded("memory")
    raise ChildFailed(str(value))


def _child(send: Connection, function: Callable[..., Any], args: tuple[Any, ...], limits: Limits) -> None:
    import resource

    # The soft limit sends SIGXCPU (which ends the process), the hard one a second later SIGKILL.
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    outcome: tuple[str, Any]
    try:
        outcome = ("ok", function(*args))
    except MemoryError:
        outcome = ("memory", None)
    except Exception as exc:  # the parent words it; the child's traceback is of no use to a user
        outcome = ("error", f"{type(exc).__name__}: {exc}")
    try:
        send.send(outcome)
    except MemoryError:
        send.send(("memory", None))
    finally:
        send.close()
