"""Checks an experiment config against expconf v0 as a Determined 0.38.1 master does, for the parts
the portal sets (tests/stubs/expconf_v0/README.md: which parts, from which upstream files).

``config_errors`` lists what the master would refuse, one line each, rendered as the master renders
them (``<config>.searcher: unknown field "num_rungs"``); ``master_message`` is the whole message the
master answers a create request with.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource

SCHEMA_DIR = Path(__file__).with_name("expconf_v0")
BASE = "http://determined.ai/schemas/expconf/v0/"


@functools.cache
def _registry() -> Registry:
    resources = []
    for path in sorted(SCHEMA_DIR.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        resources.append((document["$id"], Resource.from_contents(document)))
    return Registry().with_resources(resources)


@functools.cache
def validator(name: str = "experiment.json") -> Draft7Validator:
    schema = _registry()[BASE + name].contents
    return Draft7Validator(schema, registry=_registry())


def config_errors(config: Mapping[str, Any], *, schema: str = "experiment.json") -> list[str]:
    """What the master would refuse in ``config``, sorted as the master sorts them; empty when valid."""
    found = validator(schema).iter_errors(dict(config))
    return sorted({f"<config>{_where(error)}: {_what(error)}" for error in found})


def master_message(errors: list[str]) -> str:
    """The text of the master's HTTP 500 for a config with these errors."""
    missing = any(": missing " in line for line in errors)
    stage = (
        "config is invalid or incomplete" if missing else "version 0 experiment config is invalid: config is invalid"
    )
    return "invalid experiment configuration: " + stage + ": " + "\n".join(errors)


def _where(error: ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _what(error: ValidationError) -> str:
    instance, schema = error.instance, error.schema
    if error.validator == "additionalProperties" and isinstance(instance, dict) and isinstance(schema, dict):
        known = set(schema.get("properties", {}))
        unknown = sorted(str(key) for key in instance if key not in known)
        return ", ".join(f'unknown field "{key}"' for key in unknown)
    if error.validator == "required" and isinstance(instance, dict):
        wanted = [name for name in error.validator_value if name not in instance]
        return "missing " + ", ".join(f'"{name}"' for name in wanted)
    if error.validator == "type":
        return f"must be {' or '.join(_listed(error.validator_value))}, got {_type_of(instance)} {json.dumps(instance)}"
    if error.validator in ("const", "enum"):
        allowed = [error.validator_value] if error.validator == "const" else error.validator_value
        return f"{json.dumps(instance)} is not one of {', '.join(json.dumps(value) for value in allowed)}"
    if error.validator in ("minimum", "exclusiveMinimum", "maximum", "minItems", "pattern", "not"):
        return f"{json.dumps(instance)} does not satisfy {error.validator} {json.dumps(error.validator_value)}"
    return str(error.message)


def _listed(value: Any) -> list[str]:
    return [str(value)] if isinstance(value, str) else [str(item) for item in value]


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
