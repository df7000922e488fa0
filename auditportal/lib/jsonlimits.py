"""The one place that parses JSON written by users (API bodies, JSON form fields), with a depth limit.

Python's parser recurses once per nesting level: a few thousand ``[`` end in RecursionError, a
server error. The nesting is counted with a scan before parsing (strings skipped, so brackets inside
them do not count), and anything deeper than ``MAX_DEPTH`` is refused as a ``UserError`` naming the
field (``body`` for a request body). No portal input needs more than a few levels.
"""

from __future__ import annotations

import json
import re
from typing import Any

from auditportal.fairness.errors import UserError

MAX_DEPTH = 32

# A JSON string (escapes included; an unterminated one matches nothing and the parser reports it)
# or one bracket.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class JSONInputError(UserError):
    """JSON a user sent that the portal will not parse: malformed, or nested too deeply."""


def check_depth(text: str, *, field: str, max_depth: int = MAX_DEPTH) -> None:
    depth = 0
    for match in _TOKENS.finditer(text):
        piece = match.group()
        if piece in ("[", "{"):
            depth += 1
            if depth > max_depth:
                raise JSONInputError(
                    f"{field}: JSON nested more than {max_depth} levels deep is not accepted.", field=field
                )
        elif piece in ("]", "}"):
            depth -= 1


def json_loads(text: str | bytes, *, field: str, max_depth: int = MAX_DEPTH) -> Any:
    """``text`` parsed, or ``JSONInputError`` naming ``field``: invalid UTF-8, invalid JSON, NaN or
    Infinity (not JSON), numbers too long to read, or nesting deeper than ``max_depth``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONInputError(
                f"{field}: not UTF-8 (byte {exc.start} cannot be decoded); send JSON as UTF-8.", field=field
            ) from None
    check_depth(text, field=field, max_depth=max_depth)
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:  # the scan above should have caught it; never a server error
        raise JSONInputError(f"{field}: JSON nested too deeply.", field=field) from None
    except ValueError as exc:
        raise JSONInputError(f"{field}: not valid JSON: {exc}", field=field) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
