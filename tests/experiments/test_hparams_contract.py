"""The portal launches only what the trainer runs, and refuses what it would refuse.

Every value the portal accepts - each template's defaults, the ends of every range and categorical,
values drawn from a space - goes through the trainer's own parser (trainer/hparams.py's
``resolve_hparams``, which trainer/train.py calls) and into the model and the sampler; probes
around every allowed value must be accepted or refused by both sides alike. The test fails if the
two drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from auditportal.experiments import configs
from trainer.hparams import HPARAMS, Hparam, resolve_hparams
from trainer.loaders import GroupAwareBatchSampler
from trainer.model import TabularMLP

ODD_VALUES: list[Any] = [None, "", "x", True, False, [], {}, -1, 0, 0.5, 1, 1.5, 7, 4096, 10**6 + 1, 2**31, math.inf]


def _probes(spec: Hparam) -> list[Any]:
    probes = list(ODD_VALUES)
    if spec.low is not None and spec.high is not None:
        low, high = spec.low, spec.high
        probes += [low, high, low - 1, high + 1, (low + high) / 2, math.nextafter(low, math.inf)]
        probes += [math.nextafter(high, -math.inf), int(low), int(high)]
    probes += [*spec.choices, *(choice.upper() for choice in spec.choices), "layer", "sync_batch", "batch"]
    if spec.kind == "widths":
        probes += ["1", "4096", "4097", "0", "64,32", [64, 32], "64,x", 64, "8," * 8, "8," * 9, [4096] * 2]
        probes += ["2048,2048", "2500,2500", "64.0", [64.0], "٣"]
    return probes


def _portal_accepts(template: str, overrides: Mapping[str, Any]) -> bool:
    try:
        configs.space_build(template, overrides)
    except configs.ConfigError:
        return False
    return True


def _trainer_runs(hparams: Mapping[str, Any]) -> bool:
    """The trainer's parser accepts ``hparams``, and the model and sampler they describe build."""
    try:
        hp = resolve_hparams(dict(hparams))
    except ValueError:
        return False
    TabularMLP(
        3,
        [5, 3],
        hp["hidden_sizes"],
        dropout=hp["dropout"],
        normalization=hp["normalization"],
        embedding_dim=hp["embedding_dim"],
    )
    GroupAwareBatchSampler(np.zeros(64, dtype=np.int64), 8, 2, mode=hp["sampler"], seed=hp["seed"])
    return True


def _ends(spec: Any) -> list[Any]:
    """What Determined can hand a trial from one space entry: computed here, not by the portal."""
    if not isinstance(spec, Mapping):
        return [spec]
    if spec["type"] == "const":
        return [spec["val"]]
    if spec["type"] == "categorical":
        return list(spec["vals"])
    if spec["type"] == "log":
        base = spec.get("base", 10)
        return [base ** spec["minval"], base ** spec["maxval"]]
    return [spec["minval"], spec["maxval"]]


@pytest.mark.parametrize("name", sorted(HPARAMS))
def test_a_value_is_accepted_by_the_portal_exactly_when_the_trainer_runs_it(name: str) -> None:
    for value in _probes(HPARAMS[name]):
        portal, trainer = _portal_accepts("single", {name: value}), _trainer_runs({name: value})
        assert portal == trainer, f"{name}={value!r}: portal {'accepts' if portal else 'refuses'} it, trainer not"


@pytest.mark.parametrize("template", configs.TEMPLATES)
def test_every_value_a_template_can_produce_runs_in_the_trainer(template: str) -> None:
    space = configs.space_build(template, None)
    ends = {name: _ends(spec) for name, spec in space.items()}
    for name, values in ends.items():
        for value in values:
            chosen = {key: options[0] for key, options in ends.items()}
            chosen[name] = value
            assert _trainer_runs(chosen), f"{template}: {name}={value!r}"
    for drawn in configs.sample(space, 25, seed=1):
        assert _trainer_runs(drawn), f"{template}: {drawn}"


@pytest.mark.parametrize("name", sorted(name for name, spec in HPARAMS.items() if spec.low is not None))
@pytest.mark.parametrize("kind", ["int", "double", "log"])
def test_every_range_the_portal_accepts_yields_values_the_trainer_runs(name: str, kind: str) -> None:
    spec = HPARAMS[name]
    assert spec.low is not None
    assert spec.high is not None
    if kind == "log":
        candidates = [(-4.0, -2.0), (-1.0, 1.0), (0.0, 3.0), (1.0, 7.0)]
    else:
        candidates = [(spec.low, spec.high), (spec.low, (spec.low + spec.high) / 2), (1, 64), (0.0, 0.3)]
    accepted = 0
    for low, high in candidates:
        entry = {"type": kind, "minval": low, "maxval": high, **({"base": 10} if kind == "log" else {})}
        if not _portal_accepts("random", {name: entry}):
            continue
        accepted += 1
        space = configs.space_build("random", {name: entry})
        for value in [*_ends(entry), *(trial[name] for trial in configs.sample(space, 25, seed=2))]:
            assert _trainer_runs({name: value}), f"{name} {entry}: {value!r}"
    if spec.kind == "int" and kind != "int":
        assert accepted == 0  # whole numbers only: a double or log range would draw fractions
