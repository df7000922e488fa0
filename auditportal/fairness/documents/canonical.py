"""Canonical JSON: one byte string for one value, so its SHA-256 identifies the evidence.

Used for frozen verdict documents and for the activity log's hash chain. The same value gives the
same bytes on every machine and every run: keys sorted, no insignificant whitespace, UTF-8 (not
ASCII escapes), floats in Python's shortest round-trip form (``repr``), integers as integers.
NaN and infinities are refused (they are not JSON); so are keys that are not strings, tuples and
other types that would not survive a round trip through a JSON column unchanged.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


class NotCanonical(ValueError):
    """The value cannot be encoded canonically (a NaN, a non-string key, an unsupported type)."""


def canonical_json(value: Any) -> bytes:
    if not _valid(value):
        _check(value, "$")  # raises, naming where
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def canonical_sha256(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


_INFINITIES = (float("inf"), float("-inf"))


def _valid(value: Any) -> bool:
    """What :func:`_check` accepts, without the path to each value that it writes for its message (a
    verdict document holds thousands of values)."""
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return value == value and value not in _INFINITIES
    if isinstance(value, list):
        return all(_valid(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _valid(item) for key, item in value.items())
    return False


def _check(value: Any, where: str) -> None:
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise NotCanonical(f"{where}: {value} is not a JSON number")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{where}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotCanonical(f"{where}: key {key!r} is not a string")
            _check(item, f"{where}.{key}")
        return
    raise NotCanonical(f"{where}: {type(value).__name__} is not a JSON value (use lists, dicts, str, int, float)")
