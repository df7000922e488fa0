"""A byte size as people read it, for the messages of the core (the file reader's limits) and of the
apps (upload limits, request bodies): one formatter, so every message words a limit alike."""

from __future__ import annotations


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"
