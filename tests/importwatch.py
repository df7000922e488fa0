"""Run a Python script as ``python SCRIPT ARGS`` would, and report which of the watched modules it imported
and what imported each one first.

    python tests/importwatch.py REPORT WATCHED SCRIPT [ARGS...]

``WATCHED`` is a comma-separated list of top-level module names. At exit (a ``SystemExit`` from a failed
command included) ``REPORT`` receives JSON: for every watched module in ``sys.modules``, the frames that
imported it, innermost first, as ``path:line``. Only code that is not a library is shown (the portal's
modules, ``manage.py``, the script), so the first frame names the module to fix; where no such frame was
on the stack, the library frames that did it.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import json
import runpy
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]


def importer(stack: Sequence[traceback.FrameSummary]) -> list[str]:
    frames = [
        frame
        for frame in reversed(stack)
        if not frame.filename.startswith("<frozen") and Path(frame.filename).resolve() != HERE
    ]
    own = [frame for frame in frames if "site-packages" not in frame.filename and "/lib/python3" not in frame.filename]
    return [f"{_shown(frame.filename)}:{frame.lineno}" for frame in (own or frames[:3])]


def _shown(filename: str) -> str:
    path = Path(filename)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else filename


class Watch(importlib.abc.MetaPathFinder):
    """Finds nothing: notes the stack when a watched module is first looked for."""

    def __init__(self, watched: set[str]) -> None:
        self.watched = watched
        self.importers: dict[str, list[str]] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top in self.watched and top not in self.importers:
            self.importers[top] = importer(traceback.extract_stack()[:-1])
        return None


def main() -> None:
    report, watched, script, *args = sys.argv[1:]
    watch = Watch(set(watched.split(",")))
    sys.meta_path.insert(0, watch)

    def write() -> None:
        loaded = {name.partition(".")[0] for name in sys.modules}
        found = {
            name: watch.importers.get(name, ["(already imported when the watch began)"])
            for name in sorted(watch.watched & loaded)
        }
        Path(report).write_text(json.dumps(found))

    atexit.register(write)
    sys.argv = [script, *args]
    sys.path[0] = str(Path(script).resolve().parent)  # as `python SCRIPT` sets it
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
