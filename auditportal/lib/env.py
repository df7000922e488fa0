"""Strict parsing of settings from the environment.

A typo in a deployment's environment must stop the process with a message that names the
variable, never silently fall back to a default (``DEBUG=ture`` is an error, not "off").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
}


class EnvError(ValueError):
    pass


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    env = os.environ if environ is None else environ
    file_name = env.get(f"{name}_FILE")
    value = env.get(name)
    if file_name is not None and value is not None:
        raise EnvError(f"{name} and {name}_FILE are both set; set only one of them")
    if file_name is not None:
        try:
            return Path(file_name).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise EnvError(f"{name}_FILE={file_name!r} cannot be read: {exc.strerror}") from exc
    return value


def env_str(name: str, default: str | None = None, *, environ: Mapping[str, str] | None = None) -> str:
    value = _raw(name, environ)
    if value is None or value == "":
        if default is None:
            raise EnvError(f"{name} is required but not set")
        return default
    return value


def env_optional(name: str, *, environ: Mapping[str, str] | None = None) -> str | None:
    value = _raw(name, environ)
    return value if value else None


def env_bool(name: str, default: bool, *, environ: Mapping[str, str] | None = None) -> bool:
    value = _raw(name, environ)
    if value is None or value.strip() == "":
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise EnvError(f"{name}={value!r} is not a boolean; use one of: true, false, 1, 0, yes, no, on, off")


def env_int(
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    value = _raw(name, environ)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise EnvError(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise EnvError(f"{name}={number} is below the minimum of {minimum}")
    return number


def env_float(
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> float:
    value = _raw(name, environ)
    if value is None or value.strip() == "":
        return default
    try:
        number = float(value.strip())
    except ValueError:
        raise EnvError(f"{name}={value!r} is not a number") from None
    if number != number or (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise EnvError(f"{name}={value!r} must lie between {minimum} and {maximum}")
    return number


def env_size(name: str, default: int, *, environ: Mapping[str, str] | None = None) -> int:
    """A byte size such as ``2GiB``, ``500MB`` or ``1048576`` (units are binary)."""
    value = _raw(name, environ)
    if value is None or value.strip() == "":
        return default
    text = value.strip().lower().replace(" ", "")
    digits = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(digits) :]
    if not digits or unit not in _SIZE_UNITS:
        raise EnvError(f"{name}={value!r} is not a size; write e.g. 2GiB, 500MiB or 1048576")
    try:
        number = float(digits)
    except ValueError:
        raise EnvError(f"{name}={value!r} is not a size; write e.g. 2GiB, 500MiB or 1048576") from None
    size = int(number * _SIZE_UNITS[unit])
    if size <= 0:
        raise EnvError(f"{name}={value!r} must be larger than zero")
    return size


def env_list(name: str, default: list[str], *, environ: Mapping[str, str] | None = None) -> list[str]:
    value = _raw(name, environ)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]
