"""The bias monitor's maths against fairlearn/sklearn, on predictions made up here."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from fairlearn.metrics import MetricFrame, false_positive_rate
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import recall_score, roc_auc_score

from auditportal.fairness.files import sharding
from auditportal.fairness.files.metricsfile import metric_group
from auditportal.fairness.files.tabular import DatasetSpec, FeatureInfo, load_normalized
from tests.intersection_file import ATTRIBUTE_KEY, PAIRS, UNKNOWN, rows_by_key, write_csv
from trainer import bias
from trainer.data import load_shards

GENDERS = ("female", "male", "nonbinary")
AGES = ("18-29", "30-44", "45-64", "65+")


def _random_predictions(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "gender": rng.choice(np.array([*GENDERS, None], dtype=object), size=n, p=[0.4, 0.45, 0.1, 0.05]),
            "age": rng.choice(np.array([*AGES, None], dtype=object), size=n, p=[0.2, 0.3, 0.3, 0.15, 0.05]),
            "y": (rng.random(n) < 0.35).astype(int),
        }
    )
    # Make recall depend on gender so the gaps are not trivially zero.
    boost = frame["gender"].map({"female": -0.15, "male": 0.1, "nonbinary": 0.0}).fillna(0.0).to_numpy()
    frame["prob"] = np.clip(rng.random(n) * 0.6 + frame["y"] * 0.3 + boost, 0.0, 1.0).astype(np.float32)
    frame["pred"] = (frame["prob"] >= 0.5).astype(int)
    return frame


def _layout() -> bias.GroupLayout:
    return bias.GroupLayout.from_declared([("gender", GENDERS), ("age", AGES)])


def _codes(frame: pd.DataFrame, layout: bias.GroupLayout) -> np.ndarray:
    gender, age = layout.attributes[0], layout.attributes[1]
    g = frame["gender"].map({v: i for i, v in enumerate(GENDERS)}).fillna(gender.unknown_code).to_numpy(np.int64)
    a = frame["age"].map({v: i for i, v in enumerate(AGES)}).fillna(age.unknown_code).to_numpy(np.int64)
    return np.stack([g, a, bias.intersection_codes(g, a, gender, age)], axis=1)


def _monitor_metrics(frame: pd.DataFrame, layout: bias.GroupLayout, *, batches: int = 7) -> dict[str, float]:
    acc = bias.ConfusionAccumulator(layout)
    codes = torch.from_numpy(_codes(frame, layout))
    y = torch.from_numpy(frame["y"].to_numpy(np.float32).copy())
    prob = torch.from_numpy(frame["prob"].to_numpy(np.float32).copy())
    for chunk in np.array_split(np.arange(len(frame)), batches):
        idx = torch.from_numpy(chunk)
        acc.update(codes[idx], y[idx], prob[idx], torch.tensor(0.0))
    return acc.metrics([acc.state()], search_lambda=1.0)


def _cell_count(cell: str):
    def count(y_true: np.ndarray, y_pred: np.ndarray) -> int:
        t, p = np.asarray(y_true), np.asarray(y_pred)
        return int(
            {
                "tp": (t == 1) & (p == 1),
                "fn": (t == 1) & (p == 0),
                "fp": (t == 0) & (p == 1),
                "tn": (t == 0) & (p == 0),
            }[cell].sum()
        )

    return count


def _metric_frame(frame: pd.DataFrame, sensitive: pd.DataFrame | pd.Series) -> MetricFrame:
    return MetricFrame(
        metrics={
            "recall": lambda t, p: recall_score(t, p, zero_division=np.nan),
            "fpr": false_positive_rate,
            **{cell: _cell_count(cell) for cell in bias.CELL_NAMES},
        },
        y_true=frame["y"],
        y_pred=frame["pred"],
        sensitive_features=sensitive,
    )


def test_recall_fpr_counts_and_eod_equal_fairlearn_metricframe() -> None:
    frame = _random_predictions(5000, seed=3)
    layout = _layout()
    got = _monitor_metrics(frame, layout)
    gaps = []
    for attr, column in (("gender", "gender"), ("age", "age")):
        known = frame[frame[column].notna()]
        mf = _metric_frame(known, known[column])
        for group, row in mf.by_group.iterrows():
            for cell in bias.CELL_NAMES:
                assert got[f"count/{attr}/{group}/{cell}"] == row[cell]
            assert got[f"recall/{attr}/{group}"] == pytest.approx(row["recall"], abs=1e-12)
            assert got[f"fpr/{attr}/{group}"] == pytest.approx(row["fpr"], abs=1e-12)
        assert got[f"eod/{attr}"] == pytest.approx(mf.difference()["recall"], abs=1e-12)
        assert got[f"count/{attr}/unknown"] == frame[column].isna().sum()
        gaps.append(mf.difference()["recall"])
    both = frame[frame["gender"].notna() & frame["age"].notna()]
    mf = _metric_frame(both, both[["gender", "age"]])
    for (g, a), row in mf.by_group.iterrows():
        assert got[f"recall/gender&age/{g}&{a}"] == pytest.approx(row["recall"], abs=1e-12)
        assert got[f"count/gender&age/{g}&{a}/tp"] == row["tp"]
    assert got["eod/gender&age"] == pytest.approx(mf.difference()["recall"], abs=1e-12)
    gaps.append(mf.difference()["recall"])
    assert got["eod"] == pytest.approx(max(gaps), abs=1e-12)
    assert got["count/gender&age/unknown"] == (frame["gender"].isna() | frame["age"].isna()).sum()


def test_accuracy_and_auc_match_sklearn_on_the_same_predictions() -> None:
    frame = _random_predictions(20000, seed=5)
    got = _monitor_metrics(frame, _layout())
    assert got["accuracy"] == pytest.approx((frame["y"] == frame["pred"]).mean(), abs=1e-12)
    # Binned AUC (4096 bins): ties inside a bin count one half.
    assert got["auc"] == pytest.approx(roc_auc_score(frame["y"], frame["prob"]), abs=2e-3)


def test_group_without_positives_has_no_recall_and_eod_stays_finite() -> None:
    frame = _random_predictions(3000, seed=7)
    frame.loc[frame["gender"] == "nonbinary", "y"] = 0
    frame["pred"] = (frame["prob"] >= 0.5).astype(int)
    got = _monitor_metrics(frame, _layout())
    assert "recall/gender/nonbinary" not in got
    assert "fpr/gender/nonbinary" in got
    assert math.isfinite(got["eod"])
    assert got["eod/gender"] == pytest.approx(abs(got["recall/gender/female"] - got["recall/gender/male"]))


def test_only_one_group_with_positives_gives_zero_gap_not_nan() -> None:
    layout = bias.GroupLayout.from_declared([("gender", ("female", "male"))])
    counts = np.zeros((layout.n_slots, 4), dtype=np.int64)
    counts[0] = [5, 1, 2, 3]  # female: tn fp fn tp
    counts[1] = [7, 2, 0, 0]  # male: no positives
    got = bias.group_metrics(counts, layout)
    assert got["eod/gender"] == 0.0
    assert got["eod"] == 0.0
    assert "recall/gender/male" not in got


def test_unknown_values_are_counted_but_never_enter_a_group() -> None:
    layout = bias.GroupLayout.from_declared([("gender", ("female", "male"))])
    acc = bias.ConfusionAccumulator(layout)
    codes = torch.tensor([[0], [2], [2], [1]])  # 2 = unknown
    y = torch.tensor([1.0, 1.0, 0.0, 1.0])
    prob = torch.tensor([0.9, 0.1, 0.9, 0.2])
    acc.update(codes, y, prob, torch.tensor(0.0))
    got = acc.metrics([acc.state()], search_lambda=0.0)
    assert got["count/gender/unknown"] == 2
    assert got["recall/gender/female"] == 1.0
    assert got["recall/gender/male"] == 0.0
    assert got["eod"] == 1.0
    assert got["val_examples"] == 4


def test_counts_summed_across_workers_equal_counts_of_all_rows() -> None:
    frame = _random_predictions(4001, seed=11)
    layout = _layout()
    whole = _monitor_metrics(frame, layout, batches=5)
    codes = torch.from_numpy(_codes(frame, layout))
    y = torch.from_numpy(frame["y"].to_numpy(np.float32).copy())
    prob = torch.from_numpy(frame["prob"].to_numpy(np.float32).copy())
    workers = [bias.ConfusionAccumulator(layout) for _ in range(3)]
    for i, chunk in enumerate(np.array_split(np.arange(len(frame)), 13)):
        idx = torch.from_numpy(chunk)
        workers[i % 3].update(codes[idx], y[idx], prob[idx], torch.tensor(0.0))
    combined = workers[0].metrics([w.state() for w in workers], search_lambda=1.0)
    assert combined == whole


def test_fair_objective_adds_search_lambda_times_the_gap_beyond_noise_to_val_loss() -> None:
    layout = bias.GroupLayout.from_declared([("gender", ("female", "male"))])
    acc = bias.ConfusionAccumulator(layout)
    # One positive each, one found and one missed: an eod of 1 that is all noise.
    acc.update(torch.tensor([[0], [1]]), torch.tensor([1.0, 1.0]), torch.tensor([0.9, 0.1]), torch.tensor(3.0))
    got = acc.metrics([acc.state()], search_lambda=0.25)
    assert got["val_loss"] == pytest.approx(1.5)
    assert got["eod"] == 1.0
    assert got["eod_beyond_noise"] == 0.0
    assert got["fair_objective"] == pytest.approx(1.5)
    # 400 positives each, recall 0.9 against 0.5: the gap is far beyond noise and the objective sees it.
    acc.reset()
    codes = torch.tensor([[0]] * 400 + [[1]] * 400)
    prob = torch.tensor([0.9] * 360 + [0.1] * 40 + [0.9] * 200 + [0.1] * 200)
    acc.update(codes, torch.ones(800), prob, torch.tensor(800.0))
    got = acc.metrics([acc.state()], search_lambda=0.25)
    assert got["eod"] == pytest.approx(0.4)
    assert 0.3 < got["eod_beyond_noise"] < 0.4
    assert got["eod_beyond_noise/gender"] == got["eod_beyond_noise"]
    assert got["fair_objective"] == pytest.approx(1.0 + 0.25 * got["eod_beyond_noise"])


def test_group_names_with_slashes_cannot_break_the_metric_key_layout() -> None:
    layout = bias.GroupLayout.from_declared([("region", ("north/east", "south"))])
    counts = np.ones((layout.n_slots, 4), dtype=np.int64)
    got = bias.group_metrics(counts, layout)
    assert "recall/region/north%2Feast" in got
    assert all(k.count("/") <= 3 for k in got)


def test_count_confusion_single_bincount_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    g = rng.integers(0, 6, 100_000)
    y = rng.integers(0, 2, 100_000)
    p = rng.integers(0, 2, 100_000)
    got = bias.count_confusion(torch.from_numpy(g), torch.from_numpy(y), torch.from_numpy(p).bool(), 6)
    expected = np.bincount(g * 4 + y * 2 + p, minlength=24).reshape(6, 4)
    np.testing.assert_array_equal(got.numpy(), expected)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 1), st.floats(0.0, 1.0, allow_nan=False, width=32)),
        min_size=1,
        max_size=60,
    )
)
def test_every_row_lands_in_exactly_one_cell_per_attribute(rows: list[tuple[int, int, float]]) -> None:
    layout = bias.GroupLayout.from_declared([("a", ("x", "y", "z"))])  # code 3 = unknown
    acc = bias.ConfusionAccumulator(layout)
    codes = torch.tensor([[r[0]] for r in rows])
    acc.update(codes, torch.tensor([float(r[1]) for r in rows]), torch.tensor([r[2] for r in rows]), torch.tensor(0.0))
    got = acc.metrics([acc.state()], search_lambda=1.0)
    total = sum(got[f"count/a/{g}/{c}"] for g in ("x", "y", "z") for c in bias.CELL_NAMES) + got["count/a/unknown"]
    assert total == len(rows)
    assert 0.0 <= got["eod"] <= 1.0
    assert all(math.isfinite(v) for v in got.values())


def test_worker_share_spread_is_max_minus_min_across_ranks() -> None:
    layout = bias.GroupLayout.from_declared([("gender", ("female", "male"))])
    rank0 = np.array([80, 20, 0])  # female, male, unknown
    rank1 = np.array([30, 60, 10])
    got = bias.worker_share_metrics([rank0, rank1], layout)
    assert got["worker_share/gender/female/rank0"] == pytest.approx(0.8)
    assert got["worker_share/gender/female/rank1"] == pytest.approx(0.3)
    assert got["worker_share/gender/unknown/rank1"] == pytest.approx(0.1)
    assert got["worker_share_spread/gender"] == pytest.approx(0.5)


def test_share_window_forgets_batches_older_than_the_window() -> None:
    layout = bias.GroupLayout.from_declared([("gender", ("female", "male"))])
    window = bias.ShareWindow(layout, window=2)
    window.update(torch.tensor([[0], [0]]))
    window.update(torch.tensor([[1], [1]]))
    window.update(torch.tensor([[1], [2]]))
    np.testing.assert_array_equal(window.state(), [0, 3, 1])


def test_fairness_penalty_is_zero_for_equal_group_means_and_pushes_the_low_group_up() -> None:
    attrs = bias.GroupLayout.from_declared([("gender", ("female", "male"))]).attributes
    codes = torch.tensor([[0], [0], [1], [1], [2]])
    y = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0])
    equal = bias.group_variance_penalty(torch.tensor([0.7, 0.1, 0.7, 0.9, 0.0]), y, codes, attrs)
    assert equal.item() == pytest.approx(0.0)
    prob = torch.tensor([0.2, 0.5, 0.8, 0.5, 0.5], requires_grad=True)
    penalty = bias.group_variance_penalty(prob, y, codes, attrs)
    assert penalty.item() == pytest.approx(0.09)  # means 0.2 and 0.8: variance 0.3**2
    penalty.backward()  # type: ignore[no-untyped-call]
    assert prob.grad is not None
    assert prob.grad[0] < 0 < prob.grad[2]  # descent raises the low group, lowers the high one
    assert prob.grad[1] == 0
    assert prob.grad[3] == 0
    assert prob.grad[4] == 0


def test_scatter_count_used_on_accelerators_equals_bincount() -> None:
    index = torch.from_numpy(np.random.default_rng(2).integers(0, 40, 5000))
    np.testing.assert_array_equal(bias.scatter_count(index, 45).numpy(), torch.bincount(index, minlength=45).numpy())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_monitor_updates_never_synchronise_with_the_host_on_cuda() -> None:
    device = torch.device("cuda")
    layout = _layout()
    frame = _random_predictions(4096, seed=1)
    codes = torch.from_numpy(_codes(frame, layout)).to(device=device, dtype=torch.int32)
    y = torch.from_numpy(frame["y"].to_numpy(np.float32).copy()).to(device)
    prob = torch.from_numpy(frame["prob"].to_numpy(np.float32).copy()).to(device)
    acc = bias.ConfusionAccumulator(layout, device)
    window = bias.ShareWindow(layout, 4, device)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            acc.update(codes, y, prob, prob.sum())
            window.update(codes)
            bias.count_confusion(codes[:, 0], y, prob >= 0.5, layout.n_slots)
            bias.group_variance_penalty(prob, y, codes, layout.attributes[:2])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    on_device = acc.metrics([acc.state()], search_lambda=1.0)
    on_cpu = _monitor_metrics(frame, layout, batches=1)
    assert on_device["count/gender/female/tp"] == 3 * on_cpu["count/gender/female/tp"]
    assert on_device["eod"] == pytest.approx(on_cpu["eod"])


def test_an_intersection_keeps_groups_apart_whose_values_contain_the_separator(tmp_path: Path) -> None:
    # Issue 11: shards of the file where (a, b&c) and (a&b, c) would both read "a&b&c", read by the
    # trainer; every metric name of the intersection decodes (as the portal ingests it) to one group.
    source = write_csv(tmp_path / "ampersands.csv")
    spec = DatasetSpec(label="label", positive="1", attributes=("gender", "race"), features=("pred",))
    shard_spec = sharding.ShardSpec(
        label_column="label",
        positive="1",
        features=(FeatureInfo("pred", "numeric"),),
        attributes=(
            sharding.AttributeSpec("gender", ("a", "a&b"), ("",)),
            sharding.AttributeSpec("race", ("b&c", "c"), ("",)),
        ),
        dataset={"version_id": 1},
    )
    table = load_normalized(source, spec, display_name=source.name)
    sharding.write_shards(table, shard_spec, parts=2, out_dir=tmp_path / "shards")
    shards, rows = load_shards(tmp_path / "shards")
    layout = shards.layout()
    codes = torch.from_numpy(rows.codes)
    prob = torch.from_numpy((rows.numeric[:, 0] > 0).astype(np.float32))  # the standardised 0/1 prediction
    acc = bias.ConfusionAccumulator(layout)
    acc.update(codes, torch.from_numpy(rows.target), prob, torch.tensor(0.0))
    metrics = acc.metrics([acc.state()], search_lambda=1.0)

    cells: dict[str, dict[str, float]] = {}
    for name, value in metrics.items():
        attribute, group = metric_group(name)
        cell = name.rsplit("/", 1)[-1]
        if name.startswith("count/") and attribute == ATTRIBUTE_KEY and cell in bias.CELL_NAMES:
            cells.setdefault(group, {})[cell] = value
    assert {group: tuple(int(c[n]) for n in ("tp", "fn", "fp", "tn")) for group, c in cells.items()} == {
        key: counts for key, _, _, counts in PAIRS.values()
    }
    assert metrics["count/gender&race/unknown"] == UNKNOWN
    assert "count/gender&race/a%26b&c/tp" in metrics
    assert "count/gender/a%26b/tp" in metrics

    stats = bias.counts_to_json(acc.state()[0][: layout.n_cells], layout)[ATTRIBUTE_KEY]
    assert {group: c["tp"] + c["fn"] + c["fp"] + c["tn"] for group, c in stats["groups"].items()} == rows_by_key()

    window = bias.ShareWindow(layout, window=1)
    window.update(codes)
    shares = bias.worker_share_metrics([window.state()], layout)
    decoded = {metric_group(name)[1]: share for name, share in shares.items() if metric_group(name)[0] == ATTRIBUTE_KEY}
    total = len(rows)
    assert decoded == pytest.approx({**{k: n / total for k, n in rows_by_key().items()}, "unknown": UNKNOWN / total})
