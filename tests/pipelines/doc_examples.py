"""docs/pipelines.md shows the example scripts exactly as they are in docs/examples/: each file's text
sits in a fenced block right below a marker naming it, ``<!-- example: docs/examples/NAME -->``. The
files are the one source (CI runs them, tests/pipelines/test_example.py); ``python -m
tests.pipelines.doc_examples`` copies them into the page after an edit, and tests/pipelines/test_docs.py
fails while the page and the files differ."""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "pipelines.md"
# The marker, then a fence of four backticks (the scripts hold none) with its language, the text, the fence.
BLOCK = re.compile(r"<!-- example: (?P<path>\S+) -->\n````(?P<lang>\w+)\n(?P<text>.*?)````\n", re.DOTALL)


def examples(page: str) -> dict[str, str]:
    """Each marked block of ``page``: the file it names, and the text it shows."""
    return {match["path"]: match["text"] for match in BLOCK.finditer(page)}


def with_files(page: str) -> str:
    """``page`` with every marked block holding its file's text."""

    def block(match: re.Match[str]) -> str:
        text = (REPO / match["path"]).read_text(encoding="utf-8")
        return f"<!-- example: {match['path']} -->\n````{match['lang']}\n{text}````\n"

    return BLOCK.sub(block, page)


if __name__ == "__main__":
    PAGE.write_text(with_files(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    sys.stdout.write(f"{PAGE.relative_to(REPO)}: {', '.join(examples(PAGE.read_text(encoding='utf-8')))}\n")
