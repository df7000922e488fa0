"""The local backend's trial runner: starts the trainer, stops it when asked, records how it ended.

Started by path, ``python .../runner.py RUN_DIR [--free-port-env NAME]... [--check-seconds S] --
COMMAND...``, so it imports the standard library only (never Django or the portal: its package is not
imported). It is the half of cancelling and early stopping that runs beside the trainer: the web
process only records a cancel in the database; a worker writes ``RUN_DIR/stop``; this runner, which
checks for that file every ``--check-seconds`` (EXPERIMENT_RUNNER_CHECK_SECONDS, twice a second by
default), terminates every process of the trial and records when the last one was gone. No
process ever signals a pid it found in a file, so it works whichever machine or container (and PID
namespace) the request came from.

Files in RUN_DIR (the backend's side: backends/local.py):

- ``pid``: this runner's pid, written first.
- ``stop``: the stop request, ``{"reason": ..., "requested_at": ...}`` (written by the worker).
- ``trial.log``: the trainer's output; the command runs in ``RUN_DIR/work``.
- ``stopped``: written when a stop request ended the trainer: the request's fields plus
  ``stopped_at`` (Unix time when no process of the trial was left) and ``exit_code``.
- ``exit_code``: the trainer's exit status (negative: the signal that ended it), written last.

The trainer starts in a new session (its process group: ``python`` or ``torch.distributed.run``).
``torch.distributed.run`` starts every worker in a session of its own and stops them when it gets
SIGTERM; the runner makes itself the subreaper of everything below it, so a process that outlives
its parent is still found (and killed) among the runner's descendants.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

# How often the runner looks for a stop request, unless --check-seconds says otherwise.
CHECK_SECONDS = 0.5
# How long the trainer has to stop after SIGTERM (torch.distributed.run passes it on to its
# workers) before whatever is left of it is killed.
TERM_GRACE_SECONDS = 10.0

_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_PDEATHSIG = 1

_signalled: list[int] = []


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(text)
    os.replace(partial, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _prctl(option: int, value: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _die_with_runner() -> None:
    # In the trainer, between fork and exec: if the runner itself is killed, so is the trainer.
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


# Ports for a trial's processes are drawn from below Linux's ephemeral range (32768-60999 by default,
# /proc/sys/net/ipv4/ip_local_port_range), where the kernel never hands one out as a connection's
# source port: a port chosen with bind(("", 0)) comes from that range, and between its check and the
# trainer's own bind any outgoing connection on the machine (a database client, ZMQ's own sockets) may
# take it ("Address already in use"), as a parallel test run showed.
PORT_RANGE = (20000, 32767)


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports, each free a moment ago on every interface (held open together while
    they are chosen), drawn at random from PORT_RANGE."""
    import random

    chosen: list[socket.socket] = []
    try:
        for _ in range(count * 200):
            if len(chosen) == count:
                break
            sock = socket.socket()
            try:
                sock.bind(("", random.randint(*PORT_RANGE)))  # noqa: S311 (a port, not a secret)
            except OSError:
                sock.close()
                continue
            chosen.append(sock)
        if len(chosen) < count:
            raise OSError(f"no {count} free ports in {PORT_RANGE[0]}-{PORT_RANGE[1]}")
        return [int(sock.getsockname()[1]) for sock in chosen]
    finally:
        for sock in chosen:
            sock.close()


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process this runner can see."""
    seen: dict[int, tuple[int, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        seen[int(entry.name)] = (int(fields[1]), fields[0])
    return seen


def descendants(root: int) -> list[tuple[int, str]]:
    """(pid, state) of every process below ``root``."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: list[tuple[int, str]] = []
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append((pid, table[pid][1]))
        stack.extend(children.get(pid, []))
    return found


def _reap_orphans(child: subprocess.Popen[bytes]) -> None:
    """Collect exited processes that were handed to this runner as their subreaper."""
    for pid, state in descendants(os.getpid()):
        if state == "Z" and pid != child.pid:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _living(child: subprocess.Popen[bytes]) -> list[int]:
    child.poll()
    _reap_orphans(child)
    return [pid for pid, state in descendants(os.getpid()) if state != "Z"]


def stop_all(child: subprocess.Popen[bytes], *, grace: float = TERM_GRACE_SECONDS) -> None:
    """SIGTERM the trainer's process group, then SIGKILL whatever of the trial is left after ``grace``;
    return once no process below the runner lives."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _living(child) and time.monotonic() < deadline:
        _pause(child, 0.1)
    for _ in range(50):
        left = _living(child)
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _pause(child, 0.1)
    child.wait()


def _pause(child: subprocess.Popen[bytes], seconds: float) -> None:
    """Wait ``seconds``, or only until the trainer exits if it is still running: its exit is seen at
    once, not at the end of the wait."""
    if child.poll() is not None:
        time.sleep(seconds)
        return
    try:
        # Readable once the process has exited (Linux 5.3): no polling. The child is not reaped until
        # this runner waits for it, so its pid is still its own here.
        exited = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=seconds)  # polls every few milliseconds, up to 50 ms apart
        return
    try:
        select.select([exited], [], [], seconds)
    finally:
        os.close(exited)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _signalled.append(signum)


def run(
    run_dir: Path, command: Sequence[str], *, free_port_env: Sequence[str] = (), check_seconds: float = CHECK_SECONDS
) -> int:
    _write_atomic(run_dir / "pid", f"{os.getpid()}\n")
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    env = dict(os.environ)
    env.update(zip(free_port_env, (str(port) for port in free_ports(len(free_port_env))), strict=True))
    request = _read_json(run_dir / "stop")
    code: int | None = None
    if request is None:
        with (run_dir / "trial.log").open("wb") as log:
            child = subprocess.Popen(
                list(command),
                cwd=run_dir / "work",
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_runner,
            )
            while code is None:
                code = child.poll()
                if code is not None:
                    break
                request = _read_json(run_dir / "stop")
                if request is not None or _signalled:
                    stop_all(child)
                    code = child.returncode
                    break
                _pause(child, check_seconds)  # until the next look at the stop file
            # A trainer that exited by itself may leave helpers behind (data loader workers).
            if _living(child):
                stop_all(child, grace=2.0)
    else:
        code = 0  # asked to stop before it started: nothing ran
    if request is not None:
        _write_atomic(
            run_dir / "stopped",
            json.dumps({**request, "stopped_at": time.time(), "exit_code": code}, sort_keys=True),
        )
    _write_atomic(run_dir / "exit_code", f"{code}\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if "--" not in given:
        print("usage: runner.py RUN_DIR [--free-port-env NAME]... [--check-seconds S] -- COMMAND...", file=sys.stderr)
        return 2
    split = given.index("--")
    parser = argparse.ArgumentParser(prog="runner.py")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--free-port-env", action="append", default=[], help="set this variable to a free port")
    parser.add_argument(
        "--check-seconds", type=float, default=CHECK_SECONDS, help="how often to look for a stop request"
    )
    args = parser.parse_args(given[:split])
    command = given[split + 1 :]
    if not command:
        parser.error("no command to run")
    try:
        return run(args.run_dir, command, free_port_env=args.free_port_env, check_seconds=args.check_seconds)
    except Exception:
        # Recorded where the backend looks (the log tail, an exit status), never lost with the runner.
        with (args.run_dir / "trial.log").open("a") as log:
            log.write("trial runner failed:\n" + traceback.format_exc())
        _write_atomic(args.run_dir / "exit_code", "255\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
