"""Every Determined experiment config the portal generates is one a 0.38.1 master accepts.

The master refuses a whole experiment for one unknown key (expconf v0 has ``additionalProperties:
false`` almost everywhere), so each template, with and without overrides, is held to the field
names, types and required fields of the schemas in tests/stubs/expconf_v0 (sources and tag in the
README there), part by part.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import configs, services
from tests.stubs.expconf import config_errors
from trainer.train import parse_args

# What the portal sets, and the schema that holds each part; a new part needs its schema first.
PARTS = {
    "name": None,
    "entrypoint": None,
    "max_restarts": None,
    "searcher": "searcher.json",
    "resources": "resources.json",
    "environment": "environment.json",
    "bind_mounts": "bind-mount.json",
    "hyperparameters": "hyperparameter.json",
}
CONSTANTS: list[dict[str, Any] | None] = [
    None,
    {},
    {"learning_rate": 0.01, "normalization": "sync_batch", "hidden_sizes": "128,64"},
    {"seed": {"type": "const", "val": 3}, "fairness_lambda": 1.5},
]
RANGES: list[dict[str, Any]] = [
    {"dropout": {"type": "double", "minval": 0.0, "maxval": 0.5}},
    {"global_batch_size": {"type": "int", "minval": 32, "maxval": 128}},
    {"global_batch_size": {"type": "categorical", "vals": [64, 128]}, "sampler": "plain"},
    {
        "learning_rate": {"type": "log", "base": 10, "minval": -4, "maxval": -2},
        "seed": {"type": "int", "minval": 0, "maxval": 9},
    },
]
LAUNCHES = (
    [("single", hparams, None, 200) for hparams in CONSTANTS]
    + [("random", hparams, trials, 200) for hparams in CONSTANTS + RANGES for trials in (None, 1, 32)]
    + [
        ("asha", hparams, trials, batches)
        for hparams in CONSTANTS + RANGES
        for trials in (None, 8)
        for batches in (16, 3200)
    ]
)


def _generated(version: DatasetVersion, template: str, hparams: Any, max_trials: Any, batches: int) -> dict[str, Any]:
    text = services.experiment_config_preview(
        dataset_version=version, template=template, hparams=hparams, max_trials=max_trials, batches=batches
    )
    return configs.from_yaml(text)


@pytest.mark.parametrize(("template", "hparams", "max_trials", "batches"), LAUNCHES)
def test_every_generated_config_is_one_the_master_accepts(
    demo_version: DatasetVersion, settings: SettingsWrapper, template: str, hparams: Any, max_trials: Any, batches: int
) -> None:
    # Half the launches with the agents' view of the shard directory set apart from SHARD_DIR.
    shard_host_dir = "/srv/auditportal/shards" if LAUNCHES.index((template, hparams, max_trials, batches)) % 2 else None
    settings.SHARD_HOST_DIR = shard_host_dir
    config = _generated(demo_version, template, hparams, max_trials, batches)
    assert config_errors(config) == []
    assert set(config) == set(PARTS)
    for part, schema in PARTS.items():
        if schema == "bind-mount.json":
            assert all(config_errors(mount, schema=schema) == [] for mount in config[part])
        elif schema == "hyperparameter.json":
            assert all(config_errors(spec, schema=schema) == [] for spec in config[part].values())
        elif schema is not None:
            assert config_errors(config[part], schema=schema) == []
    # The entrypoint is one the trainer parses, on the shards the bind mount brings in.
    words = shlex.split(config["entrypoint"])
    prefix = ["python3", "-m", "determined.launch.torch_distributed", "python3", "-m", "trainer.train"]
    assert words[: len(prefix)] == prefix
    args = parse_args(words[len(prefix) :])
    assert args.batches == batches
    assert args.dataset_sha256 == demo_version.sha256
    assert args.data.startswith(config["bind_mounts"][0]["container_path"] + "/")
    assert config["bind_mounts"][0]["host_path"] == (shard_host_dir or str(settings.SHARD_DIR))
    searcher = config["searcher"]
    if template == "asha":
        assert searcher["max_time"] == args.batches
        assert args.validation_period <= searcher["max_time"] / searcher["divisor"] ** (searcher["max_rungs"] - 1)


def _asha(version: DatasetVersion) -> dict[str, Any]:
    return _generated(version, "asha", {"dropout": {"type": "double", "minval": 0.0, "maxval": 0.3}}, 8, 320)


def _set(config: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    target: Any = config
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is _DROP:
        del target[last]
    else:
        target[last] = value


_DROP = object()


@pytest.mark.parametrize(
    ("path", "value", "error"),
    [
        ("searcher.num_rungs", 3, '<config>.searcher: unknown field "num_rungs"'),
        ("searcher.max_time", _DROP, '<config>.searcher: missing "max_time"'),
        # ASHA's length is max_time in time_metric units (0.38: searcher.max_length is deprecated).
        ("searcher.time_metric", _DROP, '<config>.searcher: missing "time_metric"'),
        ("searcher.metric", _DROP, '<config>.searcher: missing "metric"'),
        (
            "searcher.mode",
            "fast",
            '<config>.searcher.mode: "fast" is not one of null, "aggressive", "standard", "conservative"',
        ),
        (
            "searcher.name",
            "pbt",
            '<config>.searcher.name: "pbt" is not one of "single", "random", "grid", "adaptive_asha", "async_halving"',
        ),
        ("slots_per_trial", 2, '<config>: unknown field "slots_per_trial"'),
        (
            "resources.slots_per_trial",
            "2",
            '<config>.resources.slots_per_trial: must be integer or null, got string "2"',
        ),
        ("environment.image", {"cpu": "a", "tpu": "b"}, '<config>.environment.image: unknown field "tpu"'),
        (
            "environment.environment_variables",
            "A=1",
            '<config>.environment.environment_variables: must be array or object or null, got string "A=1"',
        ),
        (
            "bind_mounts.0.host_path",
            "shards",
            '<config>.bind_mounts[0].host_path: "shards" does not satisfy pattern "^/"',
        ),
        ("bind_mounts.0.mode", "ro", '<config>.bind_mounts[0]: unknown field "mode"'),
        (
            "hyperparameters.seed",
            {"type": "int", "minval": 0.5, "maxval": 3},
            "<config>.hyperparameters.seed.minval: must be integer, got number 0.5",
        ),
        ("hyperparameters.dropout.step", 0.1, '<config>.hyperparameters.dropout: unknown field "step"'),
        ("entrypoint", 7, "<config>.entrypoint: must be string or array, got integer 7"),
    ],
)
def test_the_schemas_refuse_what_the_master_refuses(
    demo_version: DatasetVersion, path: str, value: Any, error: str
) -> None:
    config = _asha(demo_version)
    assert config_errors(config) == []
    _set(config, path, value)
    assert error in config_errors(config)
