"""Experiment templates, hyperparameter spaces and the Determined experiment config. No Django.

The hyperparameters themselves (names, types, allowed values, ranges, defaults, model-size limits) are
the trainer's: trainer/hparams.py, imported here and by the trainer alike.

Hyperparameter spaces use Determined's format, so the same space is submitted to a cluster and
sampled by the portal for local runs: a plain value (or ``{"type": "const", "val": v}``),
``{"type": "double"|"int", "minval": a, "maxval": b}``, ``{"type": "log", "minval": a, "maxval": b,
"base": 10}`` (exponents) or ``{"type": "categorical", "vals": [...]}``.
"""

from __future__ import annotations

import io
import random
from collections.abc import Mapping
from typing import Any

from auditportal.fairness.errors import UserError
from trainer import hparams

# The trainer's val_loss + search_lambda * eod_beyond_noise (the largest recall gap less its sampling
# noise, trainer/README.md), smaller is better; the raw eod is reported beside it but not searched on.
SEARCHER_METRIC = "fair_objective"
TEMPLATES = ("single", "random", "asha")

# Processes (Determined slots) per trial: the form, the API and the command take this range, and the
# config sets resources.slots_per_trial to the chosen value; the local backend runs that many
# processes with torch.distributed.run (gloo on CPU).
SLOTS_PER_TRIAL_MIN = 1
SLOTS_PER_TRIAL_MAX = 4


def default_max_concurrent_trials(*, backend: str, slots_per_trial: int, local_slots: int) -> int:
    """A search's ``max_concurrent_trials`` when the user gives none. Locally: as many trials as the
    machine's slots (EXPERIMENT_LOCAL_CONCURRENCY, one per core by default) hold at ``slots_per_trial``
    each, at least one. On a cluster: 0, Determined's own default (adaptive_asha: per bracket the larger
    of the last bracket's trials and the divisor; random: every trial at once)."""
    if backend != "local":
        return 0
    return max(1, local_slots // max(1, slots_per_trial))


def check_max_concurrent_trials(value: int, *, max_trials: int) -> None:
    """Determined's searcher field: 0 (the searcher's default) or a positive count; more than the
    trials is allowed (the searcher caps it) but the portal refuses it as a likely typo."""
    if not 0 <= value <= max_trials:
        raise ConfigError(
            "max_concurrent_trials",
            f"max_concurrent_trials must be between 0 (the searcher's default) and max_trials ({max_trials}), "
            f"got {value}.",
        )


# The ASHA template's searcher (adaptive_asha), which the local backend follows too (asha.py).
ASHA_MAX_RUNGS = 3
ASHA_DIVISOR = 4
ASHA_MODE = "standard"

# What a template pins (the rest takes the trainer's defaults); names, defaults, allowed values and
# ranges are the trainer's own (trainer/hparams.py), never restated here.
_TEMPLATE_HPARAMS = (
    "learning_rate",
    "hidden_sizes",
    "dropout",
    "global_batch_size",
    "normalization",
    "fairness_lambda",
    "search_lambda",
    "seed",
)
BASE_HPARAMS: dict[str, Any] = {name: hparams.DEFAULTS[name] for name in _TEMPLATE_HPARAMS}
SEARCH_HPARAMS: dict[str, Any] = {
    **BASE_HPARAMS,
    "learning_rate": {"type": "log", "base": 10, "minval": -3.5, "maxval": -2.0},
    "dropout": {"type": "double", "minval": 0.0, "maxval": 0.3},
    "fairness_lambda": {"type": "double", "minval": 0.0, "maxval": 2.0},
    "hidden_sizes": {"type": "categorical", "vals": ["32", "64,32", "128,64"]},
}


class ConfigError(UserError):
    """A wrong launch parameter; ``field`` names it (form field / CLI option)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)
        self.field: str = field


def default_space(template: str) -> dict[str, Any]:
    if template not in TEMPLATES:
        raise ConfigError("template", f"Unknown template {template!r}: choose one of {', '.join(TEMPLATES)}.")
    return dict(BASE_HPARAMS if template == "single" else SEARCH_HPARAMS)


def space_build(
    template: str, overrides: Mapping[str, Any] | None, *, features: tuple[int, int] | None = None
) -> dict[str, Any]:
    """The template's space with ``overrides`` laid over it, checked name by name with the trainer's
    rules, and the largest model it can produce checked against the trainer's size limits.

    ``features`` is the dataset's (numeric, categorical) feature count, when known.
    """
    space = default_space(template)
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError("hparams", "Hyperparameters must be a JSON object of name: value or range.")
    for name, spec in (overrides or {}).items():
        space[name] = spec
    try:
        hparams.check_space(space, features=features)
    except hparams.HparamError as exc:
        raise ConfigError("hparams", exc.message) from None
    if template == "single":
        for name, spec in space.items():
            if isinstance(spec, Mapping) and spec.get("type") != "const":
                raise ConfigError(
                    "hparams",
                    f"{name}: a single trial takes one value per hyperparameter, not a {spec.get('type')!r} range.",
                )
    return space


def check_slots_per_trial(slots: int, space: Mapping[str, Any]) -> int:
    """``slots`` if it is in the allowed range and every global batch the space can draw gives each
    process at least one row (Determined refuses a global_batch_size below the slot count)."""
    if isinstance(slots, bool) or not isinstance(slots, int) or not SLOTS_PER_TRIAL_MIN <= slots <= SLOTS_PER_TRIAL_MAX:
        raise ConfigError(
            "slots_per_trial",
            f"slots_per_trial must be a whole number from {SLOTS_PER_TRIAL_MIN} to {SLOTS_PER_TRIAL_MAX}, "
            f"got {slots!r}.",
        )
    smallest = min(
        hparams.check_entry("global_batch_size", space.get("global_batch_size", hparams.DEFAULTS["global_batch_size"]))
    )
    if smallest < slots:
        raise ConfigError(
            "slots_per_trial",
            f"slots_per_trial {slots} needs a global_batch_size of at least {slots} (one row per process); "
            f"the hyperparameters allow {smallest}.",
        )
    return slots


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


# Adaptive ASHA (expconf v0 searcher-adaptive-asha: ``max_rungs``, not ``num_rungs``): three rungs,
# each a quarter of the next.
ASHA_MAX_RUNGS = 3
ASHA_DIVISOR = 4


def validation_period(template: str, batches: int) -> int:
    # ASHA's first rung is max_time / divisor**(max_rungs - 1) = batches / 16: validate at or below it.
    return max(1, batches // 16) if template == "asha" else max(1, batches // 4)


# Where trial containers see the shard folder the portal wrote: the agents' shared shard directory
# (SHARD_HOST_DIR on every agent host) is bind-mounted here, read-only.
CONTAINER_SHARD_ROOT = "/auditportal/shards"
# Determined's PyTorch trial controller loads checkpoints with torch.load; numpy RNG state in them
# needs weights-only loading off on torch >= 2.6 (shared/DETERMINED.md).
TRIAL_ENVIRONMENT_VARIABLES = ("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1",)


def experiment_config(
    *,
    name: str,
    template: str,
    space: Mapping[str, Any],
    max_trials: int,
    batches: int,
    shard_host_dir: str,
    shard_folder: str,
    dataset_sha256: str,
    image: str,
    slots_per_trial: int = 1,
    max_concurrent_trials: int = 0,
) -> dict[str, Any]:
    """The Determined experiment config (0.38, expconf v0). Training length lives in the trainer's
    command line.

    ``shard_host_dir`` is the shared shard directory as every agent host sees it (mounted into the
    trial containers at CONTAINER_SHARD_ROOT); ``shard_folder`` is the experiment's folder inside it.
    Every key must be one expconf v0 knows: the master refuses the whole experiment otherwise
    (tests/experiments/test_expconf.py holds every generated config to the schema).
    """
    period = validation_period(template, batches)
    searcher: dict[str, Any] = {"name": "single", "metric": SEARCHER_METRIC, "smaller_is_better": True}
    if template == "random":
        searcher = {
            **searcher,
            "name": "random",
            "max_trials": max_trials,
            "max_concurrent_trials": max_concurrent_trials,
        }
    elif template == "asha":
        searcher = {
            **searcher,
            "name": "adaptive_asha",
            "max_trials": max_trials,
            # How many trials train at once (split over the brackets, asha.brackets); a stop decided at a
            # rung then ends a trial that still has work to do, and the next trial starts in its place.
            "max_concurrent_trials": max_concurrent_trials,
            "time_metric": "batches",
            "max_time": batches,
            "max_rungs": ASHA_MAX_RUNGS,
            "divisor": ASHA_DIVISOR,
            "mode": ASHA_MODE,
        }
    data = f"{CONTAINER_SHARD_ROOT}/{shard_folder}"
    return {
        "name": name,
        # The uploaded context's root holds trainer/ itself, so `-m trainer.train` imports there too.
        "entrypoint": (
            "python3 -m determined.launch.torch_distributed python3 -m trainer.train "
            f"--data {data} --dataset-sha256 {dataset_sha256} "
            f"--batches {batches} --validation-period {period}"
        ),
        "hyperparameters": {name_: _det_hparam(spec) for name_, spec in sorted(space.items())},
        "searcher": searcher,
        "resources": {"slots_per_trial": slots_per_trial},
        "max_restarts": 0,
        # The trainer's own dependencies (pyarrow) are not in Determined's default image.
        "environment": {"image": image, "environment_variables": list(TRIAL_ENVIRONMENT_VARIABLES)},
        # The shared shard directory, at the same host path on every agent (docs/determined-cluster.md).
        "bind_mounts": [{"host_path": shard_host_dir, "container_path": CONTAINER_SHARD_ROOT, "read_only": True}],
    }


def _det_hparam(spec: Any) -> Any:
    if isinstance(spec, Mapping):
        return dict(spec)
    return {"type": "const", "val": spec}


def to_yaml(config: Mapping[str, Any]) -> str:
    from ruamel.yaml import YAML  # 0.03 s to import; only launching and showing configs need it

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buffer = io.StringIO()
    yaml.dump(dict(config), buffer)
    return buffer.getvalue()


def from_yaml(text: str) -> dict[str, Any]:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    loaded = yaml.load(text)
    if not isinstance(loaded, dict):
        raise ValueError("the stored experiment config is not a mapping")
    return loaded
