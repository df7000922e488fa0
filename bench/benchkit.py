"""What the benchmark scripts share: fresh child processes, and removing the generated file.

The scripts run as ``python bench/NAME.py``, so this directory is on ``sys.path`` (and spawned
children inherit it).
"""

from __future__ import annotations

import multiprocessing
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def in_child(what: str, target: Callable[..., None], *args: Any) -> Any:
    """Run ``target(*args, queue)`` in a fresh (spawned) process and return what it put on the queue."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=target, args=(*args, queue))
    child.start()
    result = queue.get()
    child.join()
    if child.exitcode != 0:
        raise SystemExit(f"{what} failed with exit code {child.exitcode}")
    return result


def remove_generated(path: Path, directory: Path, *, keep: bool, directory_given: bool) -> None:
    """Keep ``path`` when asked; else delete it, and the temporary ``directory`` the script made."""
    if keep:
        print(f"kept {path}")
    elif directory_given:
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(directory, ignore_errors=True)
