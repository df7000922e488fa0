"""const.yaml and search.yaml as Determined 0.38 experiment configs.

Determined 0.38.1 ships no client-side JSON schema (the master validates configs), so these tests
use what the SDK does offer - its YAML loader, ExperimentConfig and the Trainer's searcher-length
check - plus the documented rules for the fields we use.
"""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any

import determined as det
import pytest
from determined import pytorch
from determined.common import util
from determined.pytorch._trainer import _check_searcher_length

from tests.stubs.expconf import config_errors
from trainer.hparams import resolve_hparams
from trainer.train import parse_args

TRAINER = Path(__file__).resolve().parents[2] / "trainer"
TOP_LEVEL_KEYS = {
    "name", "description", "entrypoint", "hyperparameters", "searcher", "resources", "max_restarts",
    "bind_mounts", "environment", "checkpoint_storage", "min_validation_period", "min_checkpoint_period",
    "reproducibility", "labels", "project", "workspace", "data", "profiling", "checkpoint_policy",
    "scheduling_unit", "records_per_epoch", "optimizations", "debug", "log_policies",
}  # fmt: skip
ASHA_KEYS = {
    "name", "metric", "smaller_is_better", "max_trials", "max_concurrent_trials", "time_metric", "max_time",
    "mode", "divisor", "max_rungs", "bracket_rungs", "source_trial_id", "source_checkpoint_uuid",
}  # fmt: skip
HP_TYPES = {"const", "int", "double", "log", "categorical"}


def _load(name: str) -> dict[str, Any]:
    config = util.safe_load_yaml_with_exceptions((TRAINER / name).read_text())
    assert isinstance(config, dict)
    return config


def _entrypoint_args(config: dict[str, Any]) -> list[str]:
    words = shlex.split(config["entrypoint"])
    prefix = ["python3", "-m", "determined.launch.torch_distributed", "python3", "-m", "trainer.train"]
    assert words[: len(prefix)] == prefix
    return words[len(prefix) :]


def _hparam_samples(spec: Any) -> list[Any]:
    if not isinstance(spec, dict):
        return [spec]
    assert spec["type"] in HP_TYPES
    if spec["type"] == "const":
        return [spec["val"]]
    if spec["type"] == "categorical":
        return list(spec["vals"])
    assert spec["minval"] < spec["maxval"]
    if spec["type"] == "log":
        return [spec["base"] ** spec["minval"], spec["base"] ** spec["maxval"]]
    return [spec["minval"], spec["maxval"]]


@pytest.mark.parametrize("name", ["const.yaml", "search.yaml"])
def test_config_uses_known_fields_and_a_working_entrypoint(name: str) -> None:
    config = _load(name)
    assert set(config) <= TOP_LEVEL_KEYS
    args = parse_args(_entrypoint_args(config))
    assert args.batches > 0
    assert det.ExperimentConfig(config).get_searcher_metric() == "fair_objective"
    assert config["searcher"]["smaller_is_better"] is True


@pytest.mark.parametrize("name", ["const.yaml", "search.yaml"])
def test_config_is_one_a_0_38_1_master_accepts(name: str) -> None:
    # expconf v0's field names, types and required fields (tests/stubs/expconf_v0).
    assert config_errors(_load(name)) == []


def test_the_trainer_parses_under_the_python_of_determineds_image() -> None:
    # Trials run in Determined's PyTorch image for 0.38.1 (Dockerfile.trainer), on Python 3.10.
    import ast

    for path in sorted(TRAINER.glob("*.py")):
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 10))


@pytest.mark.parametrize("name", ["const.yaml", "search.yaml"])
def test_every_hyperparameter_value_the_config_can_produce_is_accepted(name: str) -> None:
    hparams = _load(name)["hyperparameters"]
    samples = {key: _hparam_samples(spec) for key, spec in hparams.items()}
    for key, values in samples.items():
        for value in values:
            chosen = {k: v[0] for k, v in samples.items()}
            chosen[key] = value
            resolve_hparams(chosen)


def test_search_is_adaptive_asha_on_fair_objective_in_batches_matching_the_training_length(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = _load("search.yaml")
    searcher = config["searcher"]
    assert set(searcher) <= ASHA_KEYS
    assert searcher["name"] == "adaptive_asha"
    assert searcher["time_metric"] == "batches"
    args = parse_args(_entrypoint_args(config))
    assert searcher["max_time"] == args.batches
    first_rung = searcher["max_time"] / searcher["divisor"] ** (searcher["max_rungs"] - 1)
    assert args.validation_period <= first_rung
    with caplog.at_level(logging.WARNING):
        _check_searcher_length(exp_conf=config, max_length=pytorch.Batch(args.batches))
    assert not caplog.records
    with caplog.at_level(logging.WARNING):
        _check_searcher_length(exp_conf=config, max_length=pytorch.Batch(args.batches + 1))
    assert caplog.records  # the check above can fail


def test_const_config_hyperparameters_are_all_constants() -> None:
    hparams = _load("const.yaml")["hyperparameters"]
    assert not any(isinstance(v, dict) for v in hparams.values())
    assert _load("const.yaml")["searcher"]["name"] == "single"
