"""Experiment templates, hyperparameter spaces and the Determined experiment config. No Django.

Hyperparameter spaces use Determined's format, so the same space is submitted to a cluster and
sampled by the portal for local runs: a plain value (or ``{"type": "const", "val": v}``),
``{"type": "double"|"int", "minval": a, "maxval": b}``, ``{"type": "log", "minval": a, "maxval": b,
"base": 10}`` (exponents) or ``{"type": "categorical", "vals": [...]}``.
"""

from __future__ import annotations

import io
import math
import random
from collections.abc import Mapping
from typing import Any

from ruamel.yaml import YAML

from auditportal.fairness.errors import UserError

SEARCHER_METRIC = "fair_objective"
TEMPLATES = ("single", "random", "asha")

# The trainer's hyperparameters (trainer/train.py DEFAULT_HPARAMS); a test keeps the two in step.
KNOWN_HPARAMS = frozenset(
    {
        "learning_rate",
        "hidden_sizes",
        "dropout",
        "global_batch_size",
        "normalization",
        "fairness_lambda",
        "search_lambda",
        "seed",
        "sampler",
        "val_fraction",
        "val_batch_size",
        "share_window",
        "embedding_dim",
        "bias_monitor",
    }
)
NORMALIZATIONS = ("none", "batch", "layer")

BASE_HPARAMS: dict[str, Any] = {
    "learning_rate": 0.003,
    "hidden_sizes": "64,32",
    "dropout": 0.1,
    "global_batch_size": 128,
    "normalization": "none",
    "fairness_lambda": 0.0,
    "search_lambda": 1.0,
    "seed": 0,
}
SEARCH_HPARAMS: dict[str, Any] = {
    **BASE_HPARAMS,
    "learning_rate": {"type": "log", "base": 10, "minval": -3.5, "maxval": -2.0},
    "dropout": {"type": "double", "minval": 0.0, "maxval": 0.3},
    "fairness_lambda": {"type": "double", "minval": 0.0, "maxval": 2.0},
    "hidden_sizes": {"type": "categorical", "vals": ["32", "64,32", "128,64"]},
}

# Bounds that a value (or both ends of a range) must respect, checked before anything is queued.
_BOUNDS: dict[str, tuple[float, float, bool]] = {
    # name: (lowest, highest, highest is exclusive)
    "learning_rate": (0.0, 10.0, False),
    "dropout": (0.0, 1.0, True),
    "fairness_lambda": (0.0, 1e6, False),
    "search_lambda": (0.0, 1e6, False),
    "val_fraction": (0.0, 1.0, True),
    "global_batch_size": (1, 1 << 20, False),
    "val_batch_size": (1, 1 << 20, False),
    "share_window": (1, 1 << 20, False),
    "embedding_dim": (1, 4096, False),
    "seed": (0, 2**31 - 1, False),
}
_INTEGERS = frozenset({"global_batch_size", "val_batch_size", "share_window", "embedding_dim", "seed"})


class ConfigError(UserError):
    """A wrong launch parameter; ``field`` names it (form field / CLI option)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


def default_space(template: str) -> dict[str, Any]:
    if template not in TEMPLATES:
        raise ConfigError("template", f"Unknown template {template!r}: choose one of {', '.join(TEMPLATES)}.")
    return dict(BASE_HPARAMS if template == "single" else SEARCH_HPARAMS)


def space_build(template: str, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """The template's space with ``overrides`` laid over it, checked name by name."""
    space = default_space(template)
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError("hparams", "Hyperparameters must be a JSON object of name: value or range.")
    for name, spec in (overrides or {}).items():
        space[name] = spec
    for name, spec in space.items():
        _check_entry(template, name, spec)
    return space


def _check_entry(template: str, name: str, spec: Any) -> None:
    if name not in KNOWN_HPARAMS:
        raise ConfigError(
            "hparams", f"Unknown hyperparameter {name!r}; known ones are: {', '.join(sorted(KNOWN_HPARAMS))}."
        )
    if not isinstance(spec, Mapping):
        _check_value(name, spec)
        return
    kind = spec.get("type")
    if kind == "const":
        _check_value(name, spec.get("val"))
        return
    if template == "single":
        raise ConfigError(
            "hparams", f"{name}: a single trial takes one value per hyperparameter, not a {kind!r} range."
        )
    if kind in ("double", "int", "log"):
        if not _is_number(spec.get("minval")) or not _is_number(spec.get("maxval")):
            raise ConfigError("hparams", f"{name}: a {kind} range needs numeric minval and maxval.")
        low, high = float(spec["minval"]), float(spec["maxval"])
        if low >= high:
            raise ConfigError("hparams", f"{name}: minval ({low}) must be below maxval ({high}).")
        if kind == "log":
            base = spec.get("base", 10)
            if not _is_number(base) or base <= 1:
                raise ConfigError("hparams", f"{name}: a log range needs a base above 1.")
            _check_value(name, float(base) ** float(low))
            _check_value(name, float(base) ** float(high))
        else:
            _check_value(name, spec["minval"])
            _check_value(name, spec["maxval"])
        return
    if kind == "categorical":
        values = spec.get("vals")
        if not isinstance(values, list) or not values:
            raise ConfigError("hparams", f"{name}: a categorical range needs a non-empty list 'vals'.")
        for value in values:
            _check_value(name, value)
        return
    raise ConfigError("hparams", f"{name}: unknown range type {kind!r}; use const, double, int, log or categorical.")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_value(name: str, value: Any) -> None:
    if name == "hidden_sizes":
        text = ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not parts or not all(p.isdigit() and 0 < int(p) <= 4096 for p in parts):
            raise ConfigError("hparams", f'hidden_sizes: {value!r} is not a list of layer widths like "64,32".')
        return
    if name == "normalization":
        if value not in NORMALIZATIONS:
            raise ConfigError("hparams", f"normalization: {value!r} is not one of {', '.join(NORMALIZATIONS)}.")
        return
    if name == "sampler":
        if value not in ("stratified", "plain"):
            raise ConfigError("hparams", f"sampler: {value!r} is not one of stratified, plain.")
        return
    if name == "bias_monitor":
        if not isinstance(value, bool):
            raise ConfigError("hparams", "bias_monitor: must be true or false.")
        return
    if not _is_number(value):
        raise ConfigError("hparams", f"{name}: {value!r} is not a number.")
    if name in _INTEGERS and float(value) != int(value):
        raise ConfigError("hparams", f"{name}: {value!r} is not a whole number.")
    low, high, exclusive = _BOUNDS[name]
    if value < low or value > high or (exclusive and value >= high):
        bound = f"below {high}" if exclusive else f"at most {high}"
        raise ConfigError("hparams", f"{name}: {value!r} is out of range (at least {low}, {bound}).")


def sample(space: Mapping[str, Any], count: int, *, seed: int) -> list[dict[str, Any]]:
    """``count`` hyperparameter sets drawn from ``space`` (the local backend's random search)."""
    rng = random.Random(seed)  # noqa: S311 - reproducible search sampling, not security
    trials = []
    for _ in range(count):
        trials.append({name: _draw(spec, rng) for name, spec in sorted(space.items())})
    return trials


def _draw(spec: Any, rng: random.Random) -> Any:
    if not isinstance(spec, Mapping):
        return spec
    kind = spec["type"]
    if kind == "const":
        return spec["val"]
    if kind == "double":
        return rng.uniform(float(spec["minval"]), float(spec["maxval"]))
    if kind == "int":
        return rng.randint(int(spec["minval"]), int(spec["maxval"]))
    if kind == "log":
        return float(spec.get("base", 10)) ** rng.uniform(float(spec["minval"]), float(spec["maxval"]))
    return rng.choice(list(spec["vals"]))


def validation_period(template: str, batches: int) -> int:
    # ASHA's first rung is max_time / divisor**(rungs - 1) = batches / 16: validate at or below it.
    return max(1, batches // 16) if template == "asha" else max(1, batches // 4)


def experiment_config(
    *,
    name: str,
    template: str,
    space: Mapping[str, Any],
    max_trials: int,
    batches: int,
    shard_dir: str,
) -> dict[str, Any]:
    """The Determined experiment config (0.38). Training length lives in the trainer's command line."""
    period = validation_period(template, batches)
    searcher: dict[str, Any] = {"name": "single", "metric": SEARCHER_METRIC, "smaller_is_better": True}
    if template == "random":
        searcher = {**searcher, "name": "random", "max_trials": max_trials}
    elif template == "asha":
        searcher = {
            **searcher,
            "name": "adaptive_asha",
            "max_trials": max_trials,
            "time_metric": "batches",
            "max_time": batches,
            "num_rungs": 3,
            "divisor": 4,
            "mode": "standard",
        }
    return {
        "name": name,
        # The uploaded context's root holds trainer/ itself, so `-m trainer.train` imports there too.
        "entrypoint": (
            "python3 -m determined.launch.torch_distributed python3 -m trainer.train "
            f"--data {shard_dir} --batches {batches} --validation-period {period}"
        ),
        "hyperparameters": {name_: _det_hparam(spec) for name_, spec in sorted(space.items())},
        "searcher": searcher,
        "resources": {"slots_per_trial": 1},
        "max_restarts": 0,
        # Shards are read from the shared SHARD_DIR, mounted at the same path in trial containers.
        "bind_mounts": [{"host_path": shard_dir, "container_path": shard_dir, "read_only": True}],
    }


def _det_hparam(spec: Any) -> Any:
    if isinstance(spec, Mapping):
        return dict(spec)
    return {"type": "const", "val": spec}


def to_yaml(config: Mapping[str, Any]) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buffer = io.StringIO()
    yaml.dump(dict(config), buffer)
    return buffer.getvalue()


def from_yaml(text: str) -> dict[str, Any]:
    yaml = YAML(typ="safe", pure=True)
    loaded = yaml.load(text)
    if not isinstance(loaded, dict):
        raise ValueError("the stored experiment config is not a mapping")
    return loaded
