"""``python -m trainer.attribute`` on checkpoints trained here (Determined's local mode, CPU), and the
portal's summary of what it writes: completeness on a real model, a proxy that carries the gap
found, none found where no feature is tied to the group, the same seed giving the same file, and
bad input refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditportal.fairness.statistics.attributions import summarise, top_features, top_proxies
from tests.trainer.trainer_testkit import PROXY_HP, REPO, train_on_proxy_frame
from trainer import attribute
from trainer.predict import validation_predictions

# Each fixture trains a model (5 to 10 s): the proxy one once per session (tests/conftest.py), shared
# with tests/attributions/test_real.py in this xdist group; the CLI runs import torch in a process of
# their own.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("attribute-checkpoints")]

HP = PROXY_HP
SAMPLE = 400


@pytest.fixture(scope="module")
def proxy_run(proxy_checkpoint: tuple[Path, Path]) -> tuple[Path, Path]:
    return proxy_checkpoint


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return train_on_proxy_frame(tmp_path_factory.mktemp("attribute-plain"), proxy=False)


@pytest.fixture(scope="module")
def proxy_file(proxy_run: tuple[Path, Path]) -> dict[str, Any]:
    shards, checkpoint = proxy_run
    return attribute.attribute_validation(shards, checkpoint, HP, sample_size=SAMPLE, seed=11)


def _cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainer.attribute", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _args(shards: Path, checkpoint: Path, out: Path, *, hp: dict[str, Any] = HP, seed: int = 11) -> list[str]:
    return [
        "--data",
        str(shards),
        "--checkpoint",
        str(checkpoint),
        "--hparams",
        json.dumps(hp),
        "--sample-size",
        str(SAMPLE),
        "--seed",
        str(seed),
        "--out",
        str(out),
    ]


def test_attributions_add_up_to_the_score_less_the_baselines_within_the_tolerance(
    proxy_run: tuple[Path, Path], proxy_file: dict[str, Any]
) -> None:
    arrays = proxy_file
    gap = arrays["scores"] - arrays["baseline_score"]
    error = np.abs(arrays["attributions"].sum(axis=1) - gap)
    assert np.array_equal(error, arrays["completeness_error"])
    assert error.max() <= attribute.TOLERANCE
    assert np.abs(gap).max() > 100 * attribute.TOLERANCE  # the check is not trivially met
    assert set(np.unique(arrays["steps"])) <= set(attribute.IG_STEPS)
    assert summarise(arrays, seed=1)["completeness"]["holds"] is True
    # The scores are the checkpoint's own: trainer.predict's predictions at 0.5 on the same rows.
    shards, checkpoint = proxy_run
    predicted = validation_predictions(shards, checkpoint, HP)
    where = {(int(p), int(r)): i for i, (p, r) in enumerate(zip(predicted["part"], predicted["row"], strict=True))}
    rows = [where[(int(p), int(r))] for p, r in zip(arrays["part"], arrays["row_in_part"], strict=True)]
    assert np.array_equal(predicted["predicted"][rows], (arrays["scores"] >= 0.5).astype(np.int8))
    assert np.array_equal(predicted["target"][rows], arrays["labels"])


def test_the_file_names_the_features_groups_and_sample(proxy_file: dict[str, Any]) -> None:
    arrays = proxy_file
    assert list(arrays["features"]) == ["zip_density", "x1", "x2", "x3", "c0", "c1"]
    assert list(arrays["feature_kinds"]) == ["numeric"] * 4 + ["categorical"] * 2
    assert [key for key in arrays if key.startswith("group_codes__")] == [
        "group_codes__gender",
        "group_codes__age_group",
        "group_codes__gender&age_group",
    ]
    assert list(arrays["group_names__gender&age_group"])[:2] == ["female&18-29", "female&30-44"]
    assert arrays["attributions"].shape == arrays["values"].shape == (SAMPLE, 6)
    # Every group of every attribute is in the sample, at least min(its size, 30) rows.
    for key in ("gender", "age_group", "gender&age_group"):
        population = arrays[f"population__{key}"]
        sampled = np.bincount(arrays[f"group_codes__{key}"], minlength=population.shape[0] + 1)[:-1]
        assert (sampled >= np.minimum(population, 30)).all(), key
        assert (sampled > 0).all()
    # The proxy rows are every validation row; their values are on the file's scale.
    assert arrays["proxy_values"].shape[0] == int(arrays["population__age_group"].sum())
    assert abs(arrays["proxy_values"][:, 2].mean()) < 0.2  # x2 ~ N(0, 1) in the file, not standardised
    assert set(np.unique(arrays["values"][:, 4])) <= {0.0, 1.0, 2.0, 3.0}


def test_the_same_seed_gives_the_same_file_through_the_command(
    proxy_run: tuple[Path, Path], proxy_file: dict[str, Any], tmp_path: Path
) -> None:
    shards, checkpoint = proxy_run
    out = tmp_path / "attributions.npz"
    done = _cli(_args(shards, checkpoint, out))
    assert done.returncode == 0, done.stderr
    with np.load(out, allow_pickle=False) as data:
        written = {key: data[key] for key in data.files}
    assert sorted(written) == sorted(proxy_file)
    for key, value in proxy_file.items():
        assert np.array_equal(written[key], value), key
    assert summarise(written, seed=3) == summarise(proxy_file, seed=3)
    other = attribute.attribute_validation(shards, checkpoint, HP, sample_size=SAMPLE, seed=12)
    assert not np.array_equal(other["row_in_part"], proxy_file["row_in_part"])


def test_a_proxy_that_carries_the_gap_ranks_first_for_the_gap_and_as_a_proxy(proxy_file: dict[str, Any]) -> None:
    document = summarise(proxy_file, seed=5)
    gender = document["attributes"]["gender"]
    assert gender["reference"] == "male"
    gap = gender["groups"]["female"]["score_gap"]
    assert gap["total"] > 0.2  # women score higher: zip_density raises the log-odds
    assert top_features(document, "gender", "female", n=1) == ["zip_density"]
    assert gap["contributions"]["zip_density"] > 0.5 * gap["total"]
    assert "zip_density" in gap["beyond_noise"]
    assert top_proxies(document, "gender", "auc", n=1) == ["zip_density"]
    assert top_proxies(document, "gender", "mutual_information", n=1) == ["zip_density"]
    assert gender["proxies"]["zip_density"]["auc"] > 0.9
    # age_group has no proxy: no feature tells its groups apart beyond chance.
    age = document["attributes"]["age_group"]["proxies"]
    assert sum(entry["auc"] > entry["auc_chance"] for entry in age.values()) <= 1


def test_with_no_feature_tied_to_the_group_no_contribution_stands_out(plain_run: tuple[Path, Path]) -> None:
    shards, checkpoint = plain_run
    arrays = attribute.attribute_validation(shards, checkpoint, HP, sample_size=SAMPLE, seed=11)
    document = summarise(arrays, seed=5)
    for key in ("gender", "age_group"):
        entry = document["attributes"][key]
        for group, found in entry["groups"].items():
            if group == entry["reference"]:
                continue
            assert len(found["score_gap"]["beyond_noise"]) <= 1, (key, group, found["score_gap"]["beyond_noise"])
        assert sum(proxy["auc"] > proxy["auc_chance"] for proxy in entry["proxies"].values()) <= 1


def test_a_missing_checkpoint_exits_2_with_one_line(proxy_run: tuple[Path, Path], tmp_path: Path) -> None:
    shards, _ = proxy_run
    out = tmp_path / "out.npz"
    done = _cli(_args(shards, tmp_path / "gone", out))
    assert done.returncode == 2
    assert done.stderr == f"trainer.attribute: checkpoint folder {tmp_path / 'gone'} does not exist\n"
    assert not out.exists()


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("no state_dict", "checkpoint empty holds no state_dict.pth"),
        ("bad hparams", "trainer.attribute: Unknown hyperparameter 'lr'"),
        ("not json", "trainer.attribute: --hparams is not valid JSON"),
        ("no shards", "nowhere/manifest.json is missing"),
        ("other model", "does not fit these shards' features and hyperparameters"),
        ("tiny sample", "a sample of 5 rows cannot hold one row of each of the 11 groups"),
    ],
)
def test_bad_input_is_refused_in_one_line_and_nothing_is_written(
    proxy_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str
) -> None:
    shards, checkpoint = proxy_run
    out = tmp_path / "out.npz"
    args = _args(shards, checkpoint, out)
    if case == "no state_dict":
        (tmp_path / "empty").mkdir()
        args[3] = str(tmp_path / "empty")
    elif case == "bad hparams":
        args[5] = json.dumps({**HP, "lr": 0.1})
    elif case == "not json":
        args[5] = "{"
    elif case == "no shards":
        args[1] = str(tmp_path / "nowhere")
    elif case == "other model":
        args[5] = json.dumps({**HP, "hidden_sizes": [8]})
    elif case == "tiny sample":
        args[7] = "5"
    assert attribute.main(args) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1
    assert list(tmp_path.glob("*.npz")) == []
    assert list(tmp_path.glob(".*partial")) == []
