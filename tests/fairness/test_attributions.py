"""Per-group attribution summaries and proxy features (fairness/statistics/attributions.py) on
generated attributions files: the gap's split adds up, a feature that carries the gap ranks first
and stands beyond noise, none does when no feature is tied to the group, and the proxy measures
equal scikit-learn's."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import mutual_info_score, roc_auc_score

from auditportal.fairness.statistics import attributions
from auditportal.fairness.statistics.attributions import AttributionsError, summarise, top_features, top_proxies

FEATURES = ["zip_density", "x1", "x2", "x3", "c0", "c1"]
KINDS = ["numeric", "numeric", "numeric", "numeric", "categorical", "categorical"]
GROUPS = ["female", "male", "nonbinary"]


def _file(n: int = 2000, *, seed: int = 0, proxy: bool = True, weights: bool = False) -> dict[str, Any]:
    """An attributions file as trainer.attribute writes it. With ``proxy`` the first feature's
    values tell women from the rest and its attributions raise their score by 0.15 on average;
    every other feature, and without ``proxy`` every feature, is independent of the group."""
    rng = np.random.default_rng(seed)
    m = 3 * n
    codes = rng.choice(4, size=n, p=[0.4, 0.45, 0.1, 0.05])  # 3: unknown
    proxy_codes = rng.choice(4, size=m, p=[0.4, 0.45, 0.1, 0.05])
    labels = (rng.random(n) < 0.4).astype(np.int8)

    def values(codes: np.ndarray) -> np.ndarray:
        k = codes.shape[0]
        out = np.column_stack(
            [
                rng.normal(0.0, 1.0, k) + (np.where(codes == 0, 1.5, 0.0) if proxy else 0.0),
                rng.normal(0.0, 1.0, k),
                rng.normal(10.0, 3.0, k),
                rng.normal(0.0, 1.0, k),
                rng.integers(0, 4, k).astype(np.float64),
                rng.integers(0, 3, k).astype(np.float64),
            ]
        )
        return out

    attr = rng.normal(0.0, 0.05, (n, len(FEATURES)))
    if proxy:
        attr[:, 0] += np.where(codes == 0, 0.15, 0.0)
    attr[:, 1] += 0.05 * labels  # tied to the label, not to the group
    baseline = 0.3
    scores = baseline + attr.sum(axis=1)
    arrays: dict[str, Any] = {
        "schema": np.array(1),
        "method": np.array("Integrated Gradients (generated)"),
        "baseline_kind": np.array("generated"),
        "features": np.array(FEATURES),
        "feature_kinds": np.array(KINDS),
        "part": np.zeros(n, dtype=np.int64),
        "row_in_part": np.arange(n, dtype=np.int64),
        "labels": labels,
        "scores": scores,
        "baseline_score": np.array(baseline),
        "attributions": attr,
        "completeness_error": np.zeros(n),
        "values": values(codes),
        "group_codes__gender": codes.astype(np.int64),
        "group_names__gender": np.array(GROUPS),
        "population__gender": np.array([4000, 4500, 1000]),
        "proxy_values": values(proxy_codes),
        "proxy_group_codes__gender": proxy_codes.astype(np.int64),
    }
    if weights:
        arrays["weights"] = rng.choice([1.0, 2.0, 5.0], size=n)
    return arrays


@pytest.fixture(scope="module")
def with_proxy() -> dict[str, Any]:
    return summarise(_file(), seed=7)


def test_a_feature_that_carries_the_gap_ranks_first_and_stands_beyond_noise(with_proxy: dict[str, Any]) -> None:
    gender = with_proxy["attributes"]["gender"]
    assert gender["reference"] == "male"  # the largest population
    gap = gender["groups"]["female"]["score_gap"]
    assert top_features(with_proxy, "gender", "female", n=1) == ["zip_density"]
    assert gap["contributions"]["zip_density"] == pytest.approx(0.15, abs=0.01)
    low, high = gap["intervals"]["zip_density"]
    assert 0.0 < low < 0.15 < high
    assert "zip_density" in gap["beyond_noise"]
    # The others are noise: at most one of five beyond it at 95%, by chance.
    assert len(set(gap["beyond_noise"]) - {"zip_density"}) <= 1
    assert top_proxies(with_proxy, "gender", "auc", n=1) == ["zip_density"]
    assert top_proxies(with_proxy, "gender", "mutual_information", n=1) == ["zip_density"]
    assert gender["proxies"]["zip_density"]["auc"] > 0.8
    assert gender["proxies"]["zip_density"]["auc_group"] == "female"
    # The others reach what chance does: at most one of five beyond its 95% chance level.
    assert sum(gender["proxies"][name]["auc"] > gender["proxies"][name]["auc_chance"] for name in FEATURES[1:]) <= 1
    assert gender["proxies"]["zip_density"]["auc"] > gender["proxies"]["zip_density"]["auc_chance"]
    mi = [gender["proxies"][name]["mutual_information"] for name in FEATURES]
    chance = [gender["proxies"][name]["mutual_information_chance"] for name in FEATURES]
    assert mi[0] > chance[0]
    assert sum(m > c for m, c in zip(mi[1:], chance[1:], strict=True)) <= 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_no_feature_tied_to_the_group_no_contribution_stands_out(seed: int) -> None:
    document = summarise(_file(proxy=False, seed=seed), seed=seed)
    for group in ("female", "nonbinary"):
        gap = document["attributes"]["gender"]["groups"][group]["score_gap"]
        assert len(gap["beyond_noise"]) <= 1, gap["beyond_noise"]
        # ... and the document says so through its intervals.
        outside = [name for name, (low, high) in gap["intervals"].items() if low > 0 or high < 0]
        assert outside == gap["beyond_noise"]
        assert gap["interval"][0] < 0 < gap["interval"][1] or len(gap["beyond_noise"]) == 1


def test_the_contributions_add_up_to_the_gap_in_mean_score() -> None:
    arrays = _file(weights=True)
    document = summarise(arrays, seed=1)
    codes, scores, w = arrays["group_codes__gender"], arrays["scores"], arrays["weights"]
    for kind, rows in (("score_gap", np.ones(codes.shape[0], bool)), ("recall_gap", arrays["labels"] == 1)):
        gap = document["attributes"]["gender"]["groups"]["female"][kind]
        female, male = rows & (codes == 0), rows & (codes == 1)
        expected = np.average(scores[female], weights=w[female]) - np.average(scores[male], weights=w[male])
        assert gap["total"] == pytest.approx(expected, abs=1e-12)
        assert math.fsum(gap["contributions"].values()) == pytest.approx(gap["total"], abs=1e-12)
        assert abs(gap["residual"]) < 1e-12
    reference = document["attributes"]["gender"]["groups"]["male"]["score_gap"]
    assert reference["total"] == 0
    assert set(reference["contributions"].values()) == {0.0}
    assert all(interval == [0.0, 0.0] for interval in reference["intervals"].values())


def test_mean_abs_is_the_weighted_mean_of_absolute_attributions_in_the_group() -> None:
    arrays = _file(weights=True)
    document = summarise(arrays, seed=1)
    rows = arrays["group_codes__gender"] == 2
    expected = np.average(np.abs(arrays["attributions"][rows]), weights=arrays["weights"][rows], axis=0)
    got = document["attributes"]["gender"]["groups"]["nonbinary"]["mean_abs"]
    assert [got[name] for name in FEATURES] == pytest.approx(expected.tolist(), abs=1e-12)
    entry = document["attributes"]["gender"]["groups"]["nonbinary"]
    assert (entry["sample"], entry["population"]) == (int(rows.sum()), 1000)
    assert entry["positives"] == int(arrays["labels"][rows].sum())


def test_the_proxy_auc_and_mutual_information_equal_scikit_learns_on_the_same_bins() -> None:
    arrays = _file(n=1500, seed=3)
    document = summarise(arrays, seed=1)
    codes = arrays["proxy_group_codes__gender"]
    known = codes < len(GROUPS)
    for j, (name, kind) in enumerate(zip(FEATURES, KINDS, strict=True)):
        values, groups = arrays["proxy_values"][known, j], codes[known]
        aucs = []
        for g in range(len(GROUPS)):
            members = groups == g
            if kind == "categorical":
                share = {v: members[values == v].mean() for v in np.unique(values)}
                score = np.array([share[v] for v in values])
            else:
                score = values
            a = roc_auc_score(members, score)
            aucs.append(max(a, 1 - a))
        proxy = document["attributes"]["gender"]["proxies"][name]
        assert proxy["auc"] == pytest.approx(max(aucs), abs=1e-12)
        bins = attributions.bin_values(values, kind)
        assert len(np.unique(bins)) == (10 if kind == "numeric" else len(np.unique(values)))
        assert proxy["mutual_information"] == pytest.approx(mutual_info_score(bins, groups) / math.log(2), abs=1e-12)


def test_auc_counts_ties_as_one_half() -> None:
    scores = np.array([1.0, 1.0, 2.0, 2.0, 3.0])
    members = np.array([True, False, True, False, True])
    assert attributions.auc(scores, members) == pytest.approx(roc_auc_score(members, scores))
    assert attributions.auc(scores, np.zeros(5, bool)) == 0.5


def test_a_group_without_positives_has_no_recall_gap_and_one_without_rows_no_gap() -> None:
    arrays = _file(n=600)
    codes = arrays["group_codes__gender"]
    arrays["labels"] = np.where(codes == 2, 0, arrays["labels"]).astype(np.int8)
    arrays["group_codes__gender"] = np.where(codes == 2, 3, codes)  # nobody sampled from "nonbinary"...
    arrays["labels"][codes == 0] = 0  # ... and no woman is a positive
    document = summarise(arrays, seed=1)
    groups = document["attributes"]["gender"]["groups"]
    assert groups["female"]["recall_gap"] is None
    assert groups["female"]["score_gap"] is not None
    assert groups["nonbinary"] == {
        "sample": 0,
        "population": 1000,
        "positives": 0,
        "mean_abs": None,
        "score_gap": None,
        "recall_gap": None,
    }
    assert top_features(document, "gender", "female", kind="recall_gap") == []


def test_a_named_reference_is_used_and_an_unknown_one_is_refused() -> None:
    arrays = _file(n=600)
    document = summarise(arrays, seed=1, reference={"gender": "female"})
    assert document["attributes"]["gender"]["reference"] == "female"
    male = document["attributes"]["gender"]["groups"]["male"]["score_gap"]
    assert male["contributions"]["zip_density"] < -0.1
    with pytest.raises(AttributionsError, match="'gender' has no group 'other'") as caught:
        summarise(arrays, seed=1, reference={"gender": "other"})
    assert caught.value.field == "reference"
    with pytest.raises(AttributionsError, match="no attribute 'race'"):
        summarise(arrays, seed=1, reference={"race": "a"})


def test_the_same_seed_gives_the_same_document_and_it_is_json() -> None:
    arrays = _file(n=800)
    first = summarise(arrays, seed=5)
    assert summarise(arrays, seed=5) == first
    other = summarise(arrays, seed=6)["attributes"]["gender"]["groups"]["female"]["score_gap"]["intervals"]
    assert other != first["attributes"]["gender"]["groups"]["female"]["score_gap"]["intervals"]
    assert json.loads(json.dumps(first, allow_nan=False)) == first
    assert first["sample"] == {"size": 800, "seed": 5, "weighted": False}
    assert first["completeness"] == {"max_error": pytest.approx(0, abs=1e-12), "tolerance": 1e-3, "holds": True}
    assert first["features"] == FEATURES
    assert first["baseline"] == {"kind": "generated", "score": 0.3}


def test_completeness_that_does_not_hold_is_reported() -> None:
    arrays = _file(n=300)
    arrays["attributions"] = arrays["attributions"].copy()
    arrays["attributions"][5, 2] += 0.01
    completeness = summarise(arrays, seed=1)["completeness"]
    assert completeness["holds"] is False
    assert completeness["max_error"] == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: a.pop("scores"), "the attributions file has no 'scores' array"),
        (
            lambda a: a.update(attributions=a["attributions"][:, :3]),
            r"array 'attributions' has shape \(300, 3\); expected 300 x 6",
        ),
        (lambda a: a.update(labels=a["labels"][:-1]), r"array 'labels' has shape \(299,\); expected 300"),
        (lambda a: a.pop("population__gender"), "no 'population__gender' array"),
        (lambda a: a.update(group_codes__gender=a["group_codes__gender"] + 4), "group codes from 0 to 3"),
        (lambda a: a.update(schema=np.array(2)), "schema 2 is not supported"),
        (lambda a: a.update(feature_kinds=np.array(KINDS[:-1])), "'feature_kinds' must hold 6 strings"),
        (
            lambda a: a.update(scores=np.where(np.arange(300) == 3, np.nan, a["scores"])),
            "'scores' holds a value that is not finite",
        ),
        (lambda a: a.update(method=np.array(1.0)), "'method' must hold one string"),
        (lambda a: a.update(weights=np.zeros(300)), "'weights' must hold only positive numbers"),
        (lambda a: a.update(proxy_values=a["proxy_values"][:, :2]), "array 'proxy_values' has shape"),
    ],
)
def test_a_malformed_file_is_refused_naming_the_array(change: Any, message: str) -> None:
    arrays = _file(n=300)
    change(arrays)
    with pytest.raises(AttributionsError, match=message) as caught:
        summarise(arrays, seed=1)
    assert caught.value.field == "attributions"
