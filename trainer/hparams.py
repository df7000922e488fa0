"""The trainer's hyperparameters: names, types, allowed values, ranges, defaults, and their checks.

The one definition of this contract. The trainer resolves its hyperparameters here; the portal checks
what it is about to launch (values and Determined ranges) here too, so the two cannot disagree. It
imports neither torch nor Django (the portal imports it in web processes) and lives inside trainer/
so that the model directory uploaded to a cluster carries it.

Every refusal is an ``HparamError`` whose message starts with the hyperparameter's name and says what
is allowed, e.g. ``normalization: "layer" is not one of none, batch, sync_batch.``
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

NORMALIZATIONS = ("none", "batch", "sync_batch")
SAMPLERS = ("stratified", "plain")

# Model size. The dense parameters (hidden layers, their norms, the output layer) are what the
# hyperparameters control; embedding tables grow with the data's categories and are not counted.
# 5 million dense parameters (20 MB of float32 weights, e.g. "2048,2048" on a few hundred inputs)
# is far beyond what a tabular classifier needs and still trains on a CPU worker.
MAX_HIDDEN_LAYERS = 8
MAX_LAYER_WIDTH = 4096
MAX_DENSE_PARAMETERS = 5_000_000

# Determined's hyperparameter range types (expconf v0).
RANGE_TYPES = ("const", "int", "double", "log", "categorical")

Kind = Literal["float", "int", "bool", "choice", "widths"]


@dataclass(frozen=True)
class Hparam:
    kind: Kind
    default: Any  # as it is written in a config; resolve_hparams() normalises it like a given value
    meaning: str
    low: float | None = None
    high: float | None = None
    low_exclusive: bool = False
    high_exclusive: bool = False
    choices: tuple[str, ...] = ()


HPARAMS: dict[str, Hparam] = {
    "learning_rate": Hparam("float", 0.003, "Adam's learning rate", low=0.0, high=10.0, low_exclusive=True),
    "hidden_sizes": Hparam(
        "widths",
        "64,32",
        f'hidden layer widths, a list of ints or "64,32"; 1 to {MAX_HIDDEN_LAYERS} layers of 1 to {MAX_LAYER_WIDTH}',
    ),
    "dropout": Hparam("float", 0.1, "after every hidden layer", low=0.0, high=1.0, high_exclusive=True),
    "global_batch_size": Hparam("int", 128, "split evenly over workers", low=1, high=1 << 20),
    "normalization": Hparam("choice", "none", "after every hidden layer", choices=NORMALIZATIONS),
    "fairness_lambda": Hparam("float", 0.0, "weight of the fairness penalty in the loss", low=0.0, high=1e6),
    "search_lambda": Hparam("float", 1.0, "weight of eod_beyond_noise in fair_objective", low=0.0, high=1e6),
    "seed": Hparam("int", 0, "model init, sampler order", low=0, high=2**31 - 1),
    "sampler": Hparam("choice", "stratified", "training batch sampler", choices=SAMPLERS),
    "val_fraction": Hparam(
        "float",
        0.2,
        "share of rows held out for validation",
        low=0.0,
        high=1.0,
        low_exclusive=True,
        high_exclusive=True,
    ),
    "val_batch_size": Hparam("int", 1024, "validation batch size", low=1, high=1 << 20),
    "share_window": Hparam("int", 50, "training batches in the worker-share window", low=1, high=1 << 20),
    "embedding_dim": Hparam("int", 8, "largest embedding width of a categorical feature", low=1, high=4096),
    "bias_monitor": Hparam("bool", True, "false drops the group metrics (overhead benchmark only)"),
}
DEFAULTS: dict[str, Any] = {name: spec.default for name, spec in HPARAMS.items()}


class HparamError(ValueError):
    """A hyperparameter value or range the trainer cannot run with; ``name`` is the hyperparameter."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.name, self.message))


def resolve_hparams(given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The defaults overlaid with ``given``, each value checked and normalised (``hidden_sizes`` to a
    list of ints, whole floats of integer hyperparameters to ints); the model size is checked on the
    widths alone (the input width is known once the data is read, see ``check_model_size``)."""
    given = dict(given or {})
    for name in sorted(given):
        _known(name)
    resolved = {name: check_value(name, given.get(name, spec.default)) for name, spec in HPARAMS.items()}
    check_model_size(resolved["hidden_sizes"], normalization=resolved["normalization"], input_width=None)
    return resolved


def check_value(name: str, value: Any) -> Any:
    """``value`` normalised, or HparamError naming ``name`` and what it allows."""
    spec = _known(name)
    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise HparamError(name, f"{name}: {_show(value)} is not true or false.")
        return value
    if spec.kind == "choice":
        if not isinstance(value, str) or value not in spec.choices:
            raise HparamError(name, f"{name}: {_show(value)} is not one of {', '.join(spec.choices)}.")
        return value
    if spec.kind == "widths":
        return _widths(name, value)
    if not _is_number(value):
        raise HparamError(name, f"{name}: {_show(value)} is not a number.")
    if spec.kind == "int" and isinstance(value, float):
        if not value.is_integer():
            raise HparamError(name, f"{name}: {_show(value)} is not a whole number.")
        value = int(value)
    assert spec.low is not None
    assert spec.high is not None
    # Compared before any conversion: a huge JSON integer must not overflow float().
    too_low = value <= spec.low if spec.low_exclusive else value < spec.low
    too_high = value >= spec.high if spec.high_exclusive else value > spec.high
    if too_low or too_high:
        raise HparamError(name, f"{name}: {_show(value)} is out of range ({describe_range(spec)}).")
    return int(value) if spec.kind == "int" else float(value)


def describe_range(spec: Hparam) -> str:
    """The allowed values of a numeric hyperparameter, e.g. ``at least 0, below 1``."""
    low = f"above {_num(spec.low)}" if spec.low_exclusive else f"at least {_num(spec.low)}"
    high = f"below {_num(spec.high)}" if spec.high_exclusive else f"at most {_num(spec.high)}"
    return f"{low}, {high}"


def check_entry(name: str, spec: Any) -> list[Any]:
    """Check one entry of a Determined hyperparameter space (a plain value or a range) and return the
    values at its ends, normalised: the value, every categorical value, or both ends of a range."""
    hparam = _known(name)
    if not isinstance(spec, Mapping):
        return [check_value(name, spec)]
    kind = spec.get("type")
    if kind == "const":
        return [check_value(name, spec.get("val"))]
    if kind == "categorical":
        values = spec.get("vals")
        if not isinstance(values, list) or not values:
            raise HparamError(name, f"{name}: a categorical range needs a non-empty list 'vals'.")
        return [check_value(name, value) for value in values]
    if kind not in ("int", "double", "log"):
        raise HparamError(name, f"{name}: unknown range type {_show(kind)}; use {', '.join(RANGE_TYPES)}.")
    if hparam.kind not in ("int", "float"):
        allowed = f"one of {', '.join(hparam.choices)}" if hparam.choices else _what(hparam)
        raise HparamError(
            name,
            f'{name} takes {allowed}: use {{"type": "categorical", "vals": [...]}}, not a {_show(kind)} range.',
        )
    low: Any = spec.get("minval")
    high: Any = spec.get("maxval")
    if not _is_number(low) or not _is_number(high):
        raise HparamError(name, f"{name}: a {kind} range needs numeric minval and maxval.")
    if hparam.kind == "int" and kind != "int":
        raise HparamError(name, f"{name} is an integer: use {_int_range_hint(kind, spec)}, not a {_show(kind)} range.")
    if low >= high:
        raise HparamError(name, f"{name}: minval ({_num(low)}) must be below maxval ({_num(high)}).")
    if kind == "int" and not (_is_whole(low) and _is_whole(high)):
        raise HparamError(name, f"{name}: an int range needs whole minval and maxval.")
    if kind == "log":
        base = spec.get("base", 10)
        if not _is_number(base) or base <= 1:
            raise HparamError(name, f"{name}: a log range needs a base above 1.")
        return [check_value(name, _power(name, hparam, base, exponent)) for exponent in (low, high)]
    return [check_value(name, low), check_value(name, high)]


def check_space(space: Mapping[str, Any], *, features: tuple[int, int] | None = None) -> None:
    """Check every entry of a hyperparameter space and the largest model it can produce.

    ``features`` is (numeric features, categorical features) when known: the input width is then at
    most ``numeric + categorical * embedding_dim`` (model.py embeds a categorical in at most
    ``embedding_dim`` units); without it the model size is checked on the widths alone.
    """
    ends = {name: check_entry(name, spec) for name, spec in space.items()}
    embedding_dim = max(ends.get("embedding_dim", [DEFAULTS["embedding_dim"]]))
    norms = ends.get("normalization", [DEFAULTS["normalization"]])
    # Every normalization but "none" adds the same two affine parameters per unit.
    normalization = next((norm for norm in norms if norm != "none"), "none")
    width = None if features is None else features[0] + features[1] * int(embedding_dim)
    for sizes in ends.get("hidden_sizes", [check_value("hidden_sizes", DEFAULTS["hidden_sizes"])]):
        check_model_size(sizes, normalization=normalization, input_width=width)


def embedding_width(cardinality: int, embedding_dim: int) -> int:
    """Units of model.py's embedding of a categorical feature with ``cardinality`` codes (null and
    unseen included): ``embedding_dim``, or fewer for a feature of few categories."""
    return min(embedding_dim, max(1, cardinality // 2 + 1))


def input_width(n_numeric: int, cardinalities: Sequence[int], embedding_dim: int) -> int:
    """Inputs of model.py's first layer: the numeric features and every categorical's embedding."""
    return n_numeric + sum(embedding_width(card, embedding_dim) for card in cardinalities)


def dense_parameter_count(hidden_sizes: Sequence[int], *, input_width: int, normalization: str) -> int:
    """Parameters of model.py's hidden layers, their normalization and the output layer."""
    total, width = 0, input_width
    for size in hidden_sizes:
        total += width * size + size
        if normalization != "none":
            total += 2 * size  # batch norm's weight and bias
        width = size
    return total + width + 1


def check_model_size(hidden_sizes: Sequence[int], *, normalization: str, input_width: int | None) -> None:
    """Refuse more than MAX_DENSE_PARAMETERS dense parameters. Without ``input_width`` the first
    layer's inputs are not counted, which still refuses a model too large whatever its data."""
    count = dense_parameter_count(hidden_sizes, input_width=input_width or 0, normalization=normalization)
    if count > MAX_DENSE_PARAMETERS:
        given = ",".join(str(size) for size in hidden_sizes)
        inputs = f" on {input_width} inputs" if input_width else ""
        limit = f"at most {MAX_DENSE_PARAMETERS:,} are allowed"
        raise HparamError("hidden_sizes", f'hidden_sizes: "{given}" makes {count:,} parameters{inputs}; {limit}.')


def _known(name: str) -> Hparam:
    spec = HPARAMS.get(name)
    if spec is None:
        raise HparamError(name, f"Unknown hyperparameter {name!r}; known ones are: {', '.join(sorted(HPARAMS))}.")
    return spec


def _widths(name: str, value: Any) -> list[int]:
    if isinstance(value, str):
        parts: list[Any] = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list):
        parts = list(value)
    else:
        parts = [value]
    sizes: list[int] = []
    for part in parts:
        if isinstance(part, str) and part.isascii() and part.isdigit():
            sizes.append(int(part))
        elif isinstance(part, int) and not isinstance(part, bool):
            sizes.append(part)
        else:
            raise HparamError(name, f'{name}: {_show(value)} is not a list of layer widths like "64,32".')
    if not 1 <= len(sizes) <= MAX_HIDDEN_LAYERS:
        raise HparamError(
            name, f"{name}: {_show(value)} has {len(sizes)} hidden layers; 1 to {MAX_HIDDEN_LAYERS} are allowed."
        )
    for size in sizes:
        if not 1 <= size <= MAX_LAYER_WIDTH:
            raise HparamError(
                name, f"{name}: a layer of {size} units is out of range (at least 1, at most {MAX_LAYER_WIDTH})."
            )
    return sizes


def _power(name: str, hparam: Hparam, base: float, exponent: float) -> float:
    try:
        return float(float(base) ** float(exponent))
    except OverflowError:
        raise HparamError(
            name, f"{name}: {_num(base)}**{_num(exponent)} is out of range ({describe_range(hparam)})."
        ) from None


def _what(hparam: Hparam) -> str:
    return {"bool": "true or false", "widths": 'layer widths like "64,32"'}.get(hparam.kind, hparam.kind)


def _int_range_hint(kind: str, spec: Mapping[str, Any]) -> str:
    generic = '{"type": "int", "minval": ..., "maxval": ...}'
    low, high = spec["minval"], spec["maxval"]
    try:
        if kind == "log":
            base = spec.get("base", 10)
            if not _is_number(base) or base <= 1:
                return generic
            low, high = float(base) ** float(low), float(base) ** float(high)
        first, last = math.ceil(low), math.floor(high)
    except OverflowError:
        return generic
    if first >= last:
        return generic
    return json.dumps({"type": "int", "minval": first, "maxval": last})


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _is_whole(value: int | float) -> bool:
    return isinstance(value, int) or value.is_integer()


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _show(value: Any) -> str:
    """``value`` as the user wrote it in JSON, shortened to fit in one message."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
