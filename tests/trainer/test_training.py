"""End-to-end runs of ``python -m trainer.train`` in Determined's local training mode (CPU)."""

from __future__ import annotations

import base64
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.trainer_testkit import REPO, TrainedRun, run_trainer
from trainer.hparams import NORMALIZATIONS

# Every test here runs the trainer in a process of its own (3 to 15 s each, torch and Determined to
# import): slow. one_process, two_process and two_process_plain (tests/trainer/conftest.py) and
# lambda_runs (tests/conftest.py, shared with tests/comparisons/test_trials.py) are trained once per
# session; the tests that read them share an xdist group, so one worker trains them.
pytestmark = pytest.mark.slow


def _validations(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["kind"] == "validation"]


def _trainings(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["kind"] == "training"]


@pytest.mark.xdist_group("trained-checkpoint")
def test_metrics_file_lines_follow_schema_1(one_process: tuple[Path, list[dict[str, Any]]]) -> None:
    _, lines = one_process
    assert [(line["kind"], line["step"]) for line in lines] == [
        ("training", 20),
        ("validation", 20),
        ("training", 40),
        ("validation", 40),
    ]
    for line in lines:
        assert set(line) == {"schema", "trial", "kind", "step", "metrics"}
        assert line["schema"] == 1
        assert line["trial"] == 1
        assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in line["metrics"].values())
    metrics = _validations(lines)[-1]["metrics"]
    for key in (
        "eod",
        "eod/gender",
        "eod/age_group",
        "eod/gender&age_group",
        "eod_beyond_noise",
        "val_loss",
        "accuracy",
        "auc",
    ):
        assert key in metrics
    for group in ("female", "male"):
        assert f"recall/gender/{group}" in metrics
        assert f"fpr/gender/{group}" in metrics
        assert {f"count/gender/{group}/{c}" for c in ("tp", "fn", "fp", "tn")} <= set(metrics)
    assert metrics["count/gender/unknown"] > 0
    assert metrics["fair_objective"] == pytest.approx(metrics["val_loss"] + 1.0 * metrics["eod_beyond_noise"])
    assert 0.0 <= metrics["eod_beyond_noise"] <= metrics["eod"]
    recalls = [v for k, v in metrics.items() if k.startswith("recall/gender/")]
    assert metrics["eod/gender"] == pytest.approx(max(recalls) - min(recalls))
    training = _trainings(lines)[-1]["metrics"]
    assert "loss" in training
    assert training["worker_share_spread/gender"] == 0.0  # one worker
    assert "worker_share/gender/female/rank0" in training


@pytest.mark.xdist_group("trained-checkpoint")
@pytest.mark.parametrize("run", ["one_process", "two_process"])
def test_checkpoint_holds_bias_stats_with_the_last_validation_counts(run: str, request: pytest.FixtureRequest) -> None:
    workdir, lines = request.getfixturevalue(run)
    checkpoints = sorted((workdir / "xdg" / "determined").iterdir())
    assert len(checkpoints) == 1
    assert (checkpoints[0] / "state_dict.pth").exists()
    stats = json.loads((checkpoints[0] / "bias_stats.json").read_text())
    last = _validations(lines)[-1]["metrics"]
    assert stats["step"] == 40
    for attr, block in stats["attributes"].items():
        assert block["unknown"] == last[f"count/{attr}/unknown"]
        for group, cells in block["groups"].items():
            for cell, value in cells.items():
                assert value == last[f"count/{attr}/{group}/{cell}"]


@pytest.mark.xdist_group("trained-checkpoint")
def test_two_process_counts_equal_one_process(
    one_process: tuple[Path, list[dict[str, Any]]], two_process: tuple[Path, list[dict[str, Any]]]
) -> None:
    ones, twos = _validations(one_process[1]), _validations(two_process[1])
    assert [v["step"] for v in ones] == [v["step"] for v in twos]
    for one, two in zip(ones, twos, strict=True):
        a, b = one["metrics"], two["metrics"]
        assert set(a) == set(b)
        assert b["val_examples"] == a["val_examples"]  # every validation row exactly once
        exact = [k for k in a if k.startswith(("count/", "recall/", "fpr/", "eod")) or k == "accuracy"]
        assert len(exact) > 50
        assert {k: b[k] for k in exact} == {k: a[k] for k in exact}
        # Training is the same maths but not bit-identical (gradients are averaged by all-reduce),
        # so a probability could move across one of the 4096 AUC bins and the loss differs in the
        # last digits; the counts above are exact.
        assert b["auc"] == pytest.approx(a["auc"], abs=1e-3)
        assert b["val_loss"] == pytest.approx(a["val_loss"], rel=1e-5)


@pytest.mark.xdist_group("trained-checkpoint")
def test_stratified_sampler_keeps_worker_share_spread_under_five_points(
    two_process: tuple[Path, list[dict[str, Any]]],
) -> None:
    for line in _trainings(two_process[1]):
        spreads = {k: v for k, v in line["metrics"].items() if k.startswith("worker_share_spread/")}
        assert set(spreads) == {
            "worker_share_spread/gender",
            "worker_share_spread/age_group",
            "worker_share_spread/gender&age_group",
        }
        assert max(spreads.values()) < 0.05
        assert "worker_share/gender/female/rank1" in line["metrics"]


@pytest.mark.xdist_group("trained-checkpoint")
def test_plain_sampler_on_skewed_shards_shows_a_large_worker_share_spread(
    two_process_plain: list[dict[str, Any]],
) -> None:
    for line in _trainings(two_process_plain):
        m = line["metrics"]
        assert m["worker_share_spread/gender"] > 0.4
        assert m["worker_share/gender/female/rank0"] - m["worker_share/gender/female/rank1"] > 0.4


@pytest.mark.xdist_group("trained-checkpoint")
def test_fairness_lambda_lowers_eod_on_the_demo_dataset(lambda_runs: tuple[Path, dict[str, TrainedRun]]) -> None:
    # fairness_lambda 0 and 5, else the same: 128 rows a batch, learning rate 0.01, seed 0, 150 batches.
    _, runs = lambda_runs
    assert {name: run.hparams["fairness_lambda"] for name, run in runs.items()} == {"plain": 0.0, "fair": 5.0}
    plain, fair = runs["plain"].lines, runs["fair"].lines
    eod_plain = _validations(plain)[-1]["metrics"]["eod"]
    eod_fair = _validations(fair)[-1]["metrics"]["eod"]
    # Seeds 0-2 give 0.59-0.61 against 0.27-0.37; the margin leaves room for platform noise.
    assert eod_fair < eod_plain - 0.15
    assert _trainings(fair)[-1]["metrics"]["fairness_penalty"] >= 0.0


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_every_normalization_trains(normalization: str, demo_shards: Path, tmp_path: Path) -> None:
    lines = run_trainer(tmp_path, demo_shards, {"normalization": normalization, "global_batch_size": 64}, batches=3)
    assert _validations(lines)[-1]["step"] == 3


def test_a_refused_hyperparameter_stops_the_trainer_naming_it_and_the_allowed_values(
    demo_shards: Path, tmp_path: Path
) -> None:
    with pytest.raises(AssertionError) as excinfo:
        run_trainer(tmp_path / "layer", demo_shards, {"normalization": "layer"}, batches=3)
    assert "trainer failed (2)" in str(excinfo.value)
    assert 'trainer: refused hyperparameters: normalization: "layer" is not one of none, batch, sync_batch.' in str(
        excinfo.value
    )
    # 4,998,497 parameters on the widths alone, within the limit; the model's 6 inputs (3 numeric
    # features and a 3-unit embedding) add 24,000.
    with pytest.raises(AssertionError) as excinfo:
        run_trainer(tmp_path / "big", demo_shards, {"hidden_sizes": "4000,1248"}, batches=3)
    assert 'trainer: refused hyperparameters: hidden_sizes: "4000,1248" makes 5,022,497 parameters on 6 inputs' in str(
        excinfo.value
    )


def test_num_examples_mismatch_stops_the_trainer_with_the_message(demo_shards: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-r", str(demo_shards), str(broken)], check=True)
    meta_path = broken / "part-00000" / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["num_examples"] += 1
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(AssertionError) as excinfo:
        run_trainer(tmp_path / "run", broken, {}, batches=5)
    assert (
        f"shard part part-00000: metadata.json declares num_examples={meta['num_examples']} but "
        f"data.parquet holds {meta['num_examples'] - 1} rows" in str(excinfo.value)
    )


def test_the_trainer_refuses_before_it_imports_torch(demo_shards: Path, tmp_path: Path) -> None:
    # A refusal (the tests above) takes a fraction of a second: torch and Determined's PyTorch API
    # (about 2 s of CPU) are imported once the hyperparameters, the shards and the model's size passed.
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-r", str(demo_shards), str(broken)], check=True)
    meta_path = broken / "part-00001" / "metadata.json"
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "num_examples": 1}))
    probe = """
import json, sys
from trainer.data import ShardError
from trainer.train import main
shards, broken = sys.argv[1:]
for hparams in ({"normalization": "layer"}, {"hidden_sizes": "4000,1248"}):
    assert main(["--data", shards, "--hparams", json.dumps(hparams), "--batches", "3"]) == 2
try:
    main(["--data", broken, "--batches", "3"])
except ShardError:
    pass
else:
    raise AssertionError("the inconsistent shards were not refused")
heavy = sorted(m for m in ("torch", "determined.pytorch") if m in sys.modules)
assert not heavy, heavy
"""
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    run = subprocess.run(
        [sys.executable, "-c", probe, str(demo_shards), str(broken)], cwd=tmp_path, env=env, capture_output=True
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stderr.count(b"trainer: refused hyperparameters: ") == 2


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pathspec, inside Determined's context packer
def test_uploaded_context_holds_only_trainer_and_starts_without_the_repository(
    demo_shards: Path, tmp_path: Path
) -> None:
    from determined.common import constants, context

    files = context.read_v1_context(None, includes=[REPO / "trainer"])
    assert files
    assert all(f.path == "trainer" or f.path.startswith("trainer/") for f in files)
    assert not any("__pycache__" in f.path for f in files)
    size = sum(len(base64.b64decode(f.content or "")) for f in files)
    assert size < 1024 * 1024 < constants.MAX_CONTEXT_SIZE
    staged = tmp_path / "context"
    for f in files:
        target = staged / f.path
        if f.content:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(f.content))
        else:
            target.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    # One process (torch and Determined imported once): the trainer run as ``python -m trainer.train``
    # runs it (runpy, as __main__), then asked what the whole run imported, and from where.
    probe = """
import importlib.util, runpy, sys
staged = sys.argv[1]
sys.argv[1:] = sys.argv[2:]
try:
    runpy.run_module("trainer.train", run_name="__main__", alter_sys=True)
except SystemExit as stop:
    assert stop.code in (0, None), f"trainer exited {stop.code}"
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("django", "auditportal"))
assert not bad, bad
# Nor what a run does not use: torch's compiler (trainer/optim.py), pandas (trainer/data.py).
unused = sorted(m for m in ("torch._dynamo", "sympy", "pandas", "pyarrow.dataset") if m in sys.modules)
assert not unused, unused
origin = importlib.util.find_spec("trainer.train").origin
assert origin.startswith(staged), origin
assert all(m.__file__.startswith(staged) for n, m in sys.modules.items() if n.split(".")[0] == "trainer"), sys.modules
"""
    out = tmp_path / "m.jsonl"
    args = ["--data", str(demo_shards), "--batches", "3", "--metrics-out", str(out)]
    run = subprocess.run(
        [sys.executable, "-c", probe, str(staged), *args], cwd=staged, env=env, timeout=120, capture_output=True
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert [json.loads(line)["kind"] for line in out.read_text().splitlines()][-1] == "validation"
