"""trainer/hparams.py: the one definition of the hyperparameters, used by the trainer and the portal."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest

from tests.trainer.trainer_testkit import REPO
from trainer import hparams
from trainer.hparams import HPARAMS, MAX_DENSE_PARAMETERS, HparamError, check_entry, check_space, resolve_hparams

INTEGERS = sorted(name for name, spec in HPARAMS.items() if spec.kind == "int")


def _refusal(call: Any, *args: Any, **kwargs: Any) -> HparamError:
    with pytest.raises(HparamError) as excinfo:
        call(*args, **kwargs)
    return excinfo.value


def test_the_module_imports_neither_torch_nor_django_nor_the_portal() -> None:
    probe = (
        "import sys, trainer.hparams; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'django', 'auditportal', 'determined')); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=REPO, check=True, timeout=60)


def test_the_defaults_resolve_to_normalised_values() -> None:
    resolved = resolve_hparams({})
    assert set(resolved) == set(HPARAMS)
    assert resolved["hidden_sizes"] == [64, 32]
    assert resolved["normalization"] == "none"
    assert resolve_hparams(resolved) == resolved
    assert resolve_hparams({"global_batch_size": 256.0, "hidden_sizes": 16})["global_batch_size"] == 256
    assert resolve_hparams({"hidden_sizes": "16, 8,"})["hidden_sizes"] == [16, 8]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"normalization": "layer"}, 'normalization: "layer" is not one of none, batch, sync_batch.'),
        ({"sampler": "random"}, 'sampler: "random" is not one of stratified, plain.'),
        ({"bias_monitor": "yes"}, 'bias_monitor: "yes" is not true or false.'),
        ({"dropout": 1.0}, "dropout: 1.0 is out of range (at least 0, below 1)."),
        ({"learning_rate": 0}, "learning_rate: 0 is out of range (above 0, at most 10)."),
        ({"val_fraction": 0.0}, "val_fraction: 0.0 is out of range (above 0, below 1)."),
        ({"seed": -1}, "seed: -1 is out of range (at least 0, at most 2147483647)."),
        ({"global_batch_size": 12.5}, "global_batch_size: 12.5 is not a whole number."),
        ({"global_batch_size": "128"}, 'global_batch_size: "128" is not a number.'),
        ({"fairness_lambda": True}, "fairness_lambda: true is not a number."),
        ({"hidden_sizes": "64,x"}, 'hidden_sizes: "64,x" is not a list of layer widths like "64,32".'),
        (
            {"hidden_sizes": "64,4097"},
            "hidden_sizes: a layer of 4097 units is out of range (at least 1, at most 4096).",
        ),
        ({"hidden_sizes": ""}, 'hidden_sizes: "" has 0 hidden layers; 1 to 8 are allowed.'),
        (
            {"hidden_sizes": [8] * 9},
            "hidden_sizes: [8, 8, 8, 8, 8, 8, 8, 8, 8] has 9 hidden layers; 1 to 8 are allowed.",
        ),
        (
            {"hidden_sizes": "4096,4096"},
            'hidden_sizes: "4096,4096" makes 16,789,505 parameters; at most 5,000,000 are allowed.',
        ),
        ({"lr": 0.1}, "Unknown hyperparameter 'lr'; known ones are: " + ", ".join(sorted(HPARAMS)) + "."),
    ],
)
def test_a_refused_value_names_the_hyperparameter_and_what_it_allows(given: dict[str, Any], message: str) -> None:
    error = _refusal(resolve_hparams, given)
    assert error.message == message
    assert error.name == next(iter(given))


@pytest.mark.parametrize("name", INTEGERS)
@pytest.mark.parametrize("kind", ["double", "log"])
def test_a_double_or_log_range_for_an_integer_hyperparameter_is_refused(name: str, kind: str) -> None:
    spec = {"type": kind, "minval": 1, "maxval": 3} if kind == "log" else {"type": kind, "minval": 4, "maxval": 64}
    error = _refusal(check_entry, name, spec)
    hint = (
        '{"type": "int", "minval": 10, "maxval": 1000}'
        if kind == "log"
        else '{"type": "int", "minval": 4, "maxval": 64}'
    )
    assert error.message == f'{name} is an integer: use {hint}, not a "{kind}" range.'
    assert check_entry(name, {"type": "int", "minval": 4, "maxval": 64}) == [4, 64]


def test_a_numeric_range_for_a_categorical_hyperparameter_is_refused() -> None:
    error = _refusal(check_entry, "normalization", {"type": "double", "minval": 0, "maxval": 1})
    assert error.message == (
        'normalization takes one of none, batch, sync_batch: use {"type": "categorical", "vals": [...]}, '
        'not a "double" range.'
    )


def test_range_ends_are_checked_and_returned() -> None:
    assert check_entry("learning_rate", {"type": "log", "base": 10, "minval": -4, "maxval": -2}) == [1e-4, 1e-2]
    assert check_entry("hidden_sizes", {"type": "categorical", "vals": ["32", [64, 32]]}) == [[32], [64, 32]]
    error = _refusal(check_entry, "learning_rate", {"type": "log", "base": 10, "minval": -3, "maxval": 400})
    assert error.message == "learning_rate: 10**400 is out of range (above 0, at most 10)."
    error = _refusal(check_entry, "dropout", {"type": "double", "minval": 0.5, "maxval": 0.1})
    assert error.message == "dropout: minval (0.5) must be below maxval (0.1)."
    error = _refusal(check_entry, "embedding_dim", {"type": "int", "minval": 1.5, "maxval": 8})
    assert error.message == "embedding_dim: an int range needs whole minval and maxval."


def test_the_model_size_of_a_space_counts_the_largest_input_it_can_produce() -> None:
    space = {"hidden_sizes": "2048,2048", "embedding_dim": {"type": "int", "minval": 4, "maxval": 64}}
    check_space(space)  # 4,200,449 parameters on the widths alone
    check_space(space, features=(10, 2))  # at most 138 inputs
    error = _refusal(check_space, space, features=(10, 12))  # at most 778 inputs
    assert error.name == "hidden_sizes"
    assert error.message == (
        f'hidden_sizes: "2048,2048" makes 5,793,793 parameters on 778 inputs; at most {MAX_DENSE_PARAMETERS:,} '
        "are allowed."
    )


def test_the_trainer_readme_lists_every_hyperparameter_with_its_default_and_the_limits() -> None:
    readme = (REPO / "trainer" / "README.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", readme, flags=re.MULTILINE))
    assert set(rows) >= set(HPARAMS)
    for name, spec in HPARAMS.items():
        default = rows[name].strip().strip('`"')
        assert default == (str(spec.default).lower() if spec.kind == "bool" else str(spec.default)), name
    assert f"{MAX_DENSE_PARAMETERS:,}" in readme
    assert f"{hparams.MAX_HIDDEN_LAYERS} hidden layers" in readme
