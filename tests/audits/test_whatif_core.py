"""What-if thresholds, the pure core: a file prepared once, judged at any thresholds (no database).

The oracle is the audit itself: the document at some thresholds must be the document of
``audit_predictions`` on the same file with the equivalent 0/1 prediction column.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from auditportal.fairness.statistics import whatif
from auditportal.fairness.statistics.audit import AuditSpec, AuditSpecError, audit_predictions
from auditportal.fairness.statistics.whatif import ThresholdError, Thresholds
from tests.audits.conftest import write

MAX = 1 << 30


def _scored(path: Path, rows: int = 6000, seed: int = 7) -> Path:
    rng = np.random.default_rng(seed)
    gender = rng.choice(["f", "m", "x", "unknown"], size=rows, p=[0.45, 0.45, 0.07, 0.03])
    age = rng.choice(["young", "old"], size=rows)
    label = (rng.random(rows) < np.where(gender == "f", 0.35, 0.45)).astype(np.int8)
    shift = np.where(gender == "f", -0.08, 0.0) + np.where(age == "old", 0.03, 0.0)
    score = np.clip(rng.normal(0.35 + 0.3 * label + shift, 0.18), 0, 1).round(3)
    columns: dict[str, Any] = {"label": label, "score": score, "gender": gender, "age": age}
    pacsv.write_csv(pa.table(columns), path)
    return path


def _spec(**kwargs: Any) -> AuditSpec:
    values: dict[str, Any] = {"label": "label", "score": "score", "threshold": 0.5, "attributes": ("gender", "age")}
    return AuditSpec(**{**values, **kwargs})


def _oracle(path: Path, tmp_path: Path, spec: AuditSpec, thresholds: Thresholds) -> dict[str, Any]:
    """audit_predictions on the file with a prediction column made by these thresholds, row by row."""
    table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(strings_can_be_null=False))
    score = table.column("score").to_numpy()
    per_row = np.full(len(score), thresholds.threshold)
    if thresholds.groups:
        attribute = str(thresholds.attribute)
        attributes = attribute.split("&")
        keys = ["&".join(values) for values in zip(*(table.column(a).to_pylist() for a in attributes), strict=True)]
        for index, key in enumerate(keys):
            if key in thresholds.groups:
                per_row[index] = thresholds.groups[key]
    predicted = table.append_column("pred", pa.array((score >= per_row).astype(np.int8)))
    target = tmp_path / "oracle.csv"
    pacsv.write_csv(predicted.drop_columns(["score"]), target)
    oracle_spec = AuditSpec(
        **{**spec.parameters(), "score": None, "threshold": None, "prediction": "pred"}
        | {key: tuple(value) for key, value in spec.parameters().items() if isinstance(value, list)}
    )
    return audit_predictions(target, oracle_spec, display_name=target.name, max_bytes=MAX).document


def _same_judgement(left: dict[str, Any], right: dict[str, Any]) -> None:
    for key in ("file", "prediction"):
        left, right = {k: v for k, v in left.items() if k != key}, {k: v for k, v in right.items() if k != key}
    assert json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


@pytest.mark.parametrize(
    "thresholds",
    [
        Thresholds(threshold=0.5),
        Thresholds(threshold=0.42),
        Thresholds(threshold=0.5, attribute="gender", groups={"f": 0.41, "x": 0.6}),
        Thresholds(threshold=0.47, attribute="age", groups={"old": 0.55}),
        Thresholds(threshold=2.0),  # nobody predicted positive
        Thresholds(threshold=0.5, attribute="gender&age", groups={"f&young": 0.3, "m&old": 0.651}),
    ],
    ids=["start", "global", "gender", "age", "none-positive", "intersection"],
)
def test_the_document_at_any_thresholds_is_the_audit_of_the_equivalent_predictions(
    tmp_path: Path, thresholds: Thresholds
) -> None:
    path = _scored(tmp_path / "scores.csv")
    spec = _spec(intersect=True)
    prepared = whatif.prepare(path, spec, display_name="scores.csv", max_bytes=MAX)
    document = whatif.document_at(prepared, thresholds)
    json.dumps(document, allow_nan=False)
    _same_judgement(document, _oracle(path, tmp_path, spec, thresholds))
    assert document["prediction"]["threshold"] == thresholds.threshold
    if thresholds.groups:
        assert document["prediction"]["thresholds"]["groups"] == dict(thresholds.groups)


def test_a_threshold_equal_to_a_score_predicts_that_row_positive(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "label,score,g\n1,0.5,a\n0,0.5,a\n1,0.4,b\n0,0.6,b\n")
    prepared = whatif.prepare(path, _spec(attributes=("g",)), display_name="p.csv", max_bytes=MAX)
    groups = whatif.document_at(prepared, Thresholds(threshold=0.5))["attributes"]["g"]["groups"]
    assert (groups["a"]["tp"], groups["a"]["fp"]) == (1, 1)
    assert (groups["b"]["tp"], groups["b"]["fp"]) == (0, 1)


def test_the_prepared_data_survives_its_meta_and_a_memory_map(tmp_path: Path) -> None:
    path = _scored(tmp_path / "scores.csv", rows=2000)
    prepared = whatif.prepare(path, _spec(), display_name="scores.csv", max_bytes=MAX)
    np.save(tmp_path / "scores.npy", prepared.scores)
    again = whatif.Prepared.from_meta(
        json.loads(json.dumps(prepared.meta())), np.load(tmp_path / "scores.npy", mmap_mode="r")
    )
    thresholds = Thresholds(threshold=0.45, attribute="gender", groups={"m": 0.55})
    assert whatif.document_at(again, thresholds) == whatif.document_at(prepared, thresholds)


def test_accuracy_is_given_overall_and_per_group(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "label,score,g\n1,0.9,a\n0,0.2,a\n1,0.4,b\n0,0.6,b\n")
    prepared = whatif.prepare(path, _spec(attributes=("g",)), display_name="p.csv", max_bytes=MAX)
    answer = whatif.answer_at(prepared, Thresholds(threshold=0.5))
    assert answer["accuracy"]["overall"] == 0.5
    assert answer["accuracy"]["groups"]["g"] == {"a": 1.0, "b": 0.0}


def test_a_file_without_scores_is_refused_naming_the_score_field(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "label,pred,g\n1,1,a\n0,0,b\n")
    with pytest.raises(AuditSpecError) as caught:
        whatif.prepare(path, _spec(score=None, prediction="pred", threshold=None), display_name="p.csv", max_bytes=MAX)
    assert caught.value.field == "score"
    assert "a what-if needs a score column" in str(caught.value)


def test_a_score_that_is_not_a_number_names_its_row_and_column(tmp_path: Path) -> None:
    from auditportal.fairness.files.tabular import DatasetError

    path = write(tmp_path / "p.csv", "label,score,g\n1,0.9,a\n0,high,b\n")
    with pytest.raises(DatasetError) as caught:
        whatif.prepare(path, _spec(attributes=("g",)), display_name="p.csv", max_bytes=MAX)
    assert "'high' is not a number" in str(caught.value)
    assert caught.value.row == 2
    assert caught.value.column == "score"


def test_an_override_for_a_group_that_does_not_exist_names_it(tmp_path: Path) -> None:
    path = _scored(tmp_path / "scores.csv", rows=500)
    prepared = whatif.prepare(path, _spec(), display_name="scores.csv", max_bytes=MAX)
    with pytest.raises(ThresholdError) as caught:
        whatif.document_at(prepared, Thresholds(threshold=0.5, attribute="gender", groups={"q": 0.4}))
    assert caught.value.field == "threshold[gender=q]"
    assert str(caught.value).startswith("'q' is not a group of 'gender' (groups: 'f', 'm', 'x')")
    with pytest.raises(ThresholdError) as caught:
        whatif.document_at(prepared, Thresholds(threshold=0.5, attribute="income", groups={"low": 0.4}))
    assert caught.value.field == "threshold[income=low]"
    with pytest.raises(ThresholdError) as caught:
        whatif.document_at(prepared, Thresholds(threshold=float("nan")))
    assert caught.value.field == "threshold"


# --------------------------------------------------------------------------- suggestions


def _fairlearn(path: Path) -> tuple[float, float]:
    """fairlearn's ThresholdOptimizer (true_positive_rate_parity, accuracy) on the same rows: its
    expected accuracy and TPR gap over its randomised predictions."""
    import pandas as pd
    from fairlearn.postprocessing import ThresholdOptimizer
    from sklearn.base import BaseEstimator

    class Scores(BaseEstimator):  # type: ignore[misc]
        """A fitted "model" whose decision function is the score column (a prefit estimator)."""

        def fit(self, X: Any, y: Any) -> Scores:
            self.fitted_ = True
            return self

        def predict(self, X: Any) -> Any:
            return np.asarray(X["score"], dtype=float)

    frame = pd.read_csv(path, keep_default_na=False)
    frame = frame[frame["gender"] != "unknown"]
    optimizer = ThresholdOptimizer(
        estimator=Scores().fit(None, None),
        constraints="true_positive_rate_parity",
        objective="accuracy_score",
        prefit=True,
        predict_method="predict",
    )
    optimizer.fit(frame[["score"]], frame["label"], sensitive_features=frame["gender"])
    positive = optimizer._pmf_predict(frame[["score"]], sensitive_features=frame["gender"])[:, 1]
    label = frame["label"].to_numpy()
    accuracy = float(np.mean(positive * label + (1 - positive) * (1 - label)))
    tprs = [float(positive[(frame["gender"] == g).to_numpy() & (label == 1)].mean()) for g in ("f", "m", "x")]
    return accuracy, max(tprs) - min(tprs)


def test_suggested_thresholds_reach_the_tolerance_about_as_accurately_as_fairlearn(tmp_path: Path) -> None:
    path = _scored(tmp_path / "scores.csv", rows=20_000, seed=3)
    frame_path = path
    spec = _spec(attributes=("gender",), tolerance=0.02)
    prepared = whatif.prepare(path, spec, display_name="scores.csv", max_bytes=MAX)
    suggestion = whatif.suggest(prepared)
    assert suggestion.gap_before is not None
    assert suggestion.gap_before > 0.05
    assert suggestion.reached
    assert suggestion.gap_after is not None
    assert suggestion.gap_after <= 0.02
    # The suggestion, applied, gives that gap in the judged document too.
    document = whatif.document_at(prepared, suggestion.thresholds)
    tprs = [group["tpr"] for group in document["attributes"]["gender"]["groups"].values()]
    assert max(tprs) - min(tprs) == pytest.approx(suggestion.gap_after)

    # fairlearn's rows leave the unknown group out; ours keeps it at the global threshold. Compare
    # accuracy over the known rows.
    known = {name: values for name, values in document["attributes"]["gender"]["groups"].items()}
    ours = sum(v["tp"] + v["tn"] for v in known.values()) / sum(v["n"] for v in known.values())
    theirs, their_gap = _fairlearn(frame_path)
    assert their_gap < 0.02
    # Ours is deterministic and allowed the tolerance's slack; fairlearn's randomises to an exact
    # parity. Ours must be within 0.01 of fairlearn's accuracy (it is usually above it).
    assert ours >= theirs - 0.01, (ours, theirs)
    print(f"ours {ours:.4f} gap {suggestion.gap_after:.4f}; fairlearn {theirs:.4f} gap {their_gap:.4f}")
    assert suggestion.accuracy_after <= suggestion.accuracy_before + 1e-12 or suggestion.accuracy_after > 0


def test_the_suggestion_is_deterministic_and_says_its_cost(tmp_path: Path) -> None:
    path = _scored(tmp_path / "scores.csv", rows=5000, seed=11)
    prepared = whatif.prepare(path, _spec(attributes=("gender",)), display_name="scores.csv", max_bytes=MAX)
    first, second = whatif.suggest(prepared, tolerance=0.03), whatif.suggest(prepared, tolerance=0.03)
    assert first == second
    described = first.as_json()
    assert described["accuracy_cost"] == pytest.approx(first.accuracy_before - first.accuracy_after)
    assert set(described["thresholds"]["groups"]) == {"f", "m", "x"}


def _plain_level_search(
    options: list[tuple[str, Any, Any, Any]], *, delta: float, fixed_correct: int
) -> dict[str, float]:
    """The search as first written, one level and one group at a time: the oracle of the vectorised one."""
    levels = np.unique(np.concatenate([tpr for _, _, tpr, _ in options]))
    if len(levels) > whatif.SUGGEST_LEVELS:
        levels = levels[np.linspace(0, len(levels) - 1, whatif.SUGGEST_LEVELS).round().astype(int)]
    best_total, best = -1, {}
    for level in levels.tolist():
        total, picks = fixed_correct, {}
        for group, candidates, tpr, correct in options:
            low = int(np.searchsorted(tpr, level, "left"))
            high = int(np.searchsorted(tpr, level + delta + 1e-12, "right"))
            if low >= high:
                break
            index = low + int(np.argmax(correct[low:high]))
            total += int(correct[index])
            picks[group] = float(candidates[index])
        else:
            if total > best_total:
                best_total, best = total, picks
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_level_search_over_all_levels_at_once_picks_what_the_plain_loop_picks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    options = []
    for group in range(int(rng.integers(1, 12))):
        size = int(rng.integers(1, 60))
        # Few distinct TPRs and correct counts: ties everywhere, where "the first among equals" matters.
        tpr = np.sort(rng.integers(0, 7, size) / 6)
        correct = rng.integers(0, 5, size).astype(np.int64)
        options.append((f"g{group}", np.sort(rng.random(size)), tpr, correct))
    for delta in (0.0, 0.05, 0.2, 1.0):
        expected = _plain_level_search(options, delta=delta, fixed_correct=3)
        assert whatif._best_level(options, delta=delta, fixed_correct=3) == expected


def test_suggested_thresholds_for_the_intersection_bring_its_gap_within_the_tolerance(tmp_path: Path) -> None:
    path = _scored(tmp_path / "scores.csv", rows=20_000, seed=3)
    prepared = whatif.prepare(path, _spec(intersect=True, tolerance=0.02), display_name="scores.csv", max_bytes=MAX)
    suggestion = whatif.suggest(prepared, attribute="gender&age")
    document = whatif.document_at(prepared, suggestion.thresholds)
    section = document["attributes"]["gender&age"]
    # The intersection's groups are its combinations with rows, as in the document.
    assert list(suggestion.tpr) == list(section["groups"])
    assert suggestion.reached
    assert suggestion.gap_before is not None
    assert suggestion.gap_before > 0.1
    tprs = [group["tpr"] for group in section["groups"].values()]
    assert suggestion.gap_after == pytest.approx(max(tprs) - min(tprs))
    assert max(tprs) - min(tprs) <= 0.02
    assert suggestion.coarse == ()  # every combination has more than 1/0.02 = 50 positives here


def test_small_intersection_groups_are_named_as_coarse_and_combinations_without_rows_left_out(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    rows = 3000
    gender = rng.choice(["f", "m"], size=rows)
    region = np.where(rng.random(rows) < 0.01, "north", rng.choice(["south", "east"], size=rows))
    region[(gender == "m") & (region == "north")] = "south"  # (m, north) has no rows
    label = (rng.random(rows) < 0.4).astype(np.int8)
    score = np.clip(rng.normal(0.35 + 0.3 * label, 0.2), 0, 1).round(3)
    path = tmp_path / "scores.csv"
    columns: dict[str, Any] = {"label": label, "score": score, "gender": gender, "region": region}
    pacsv.write_csv(pa.table(columns), path)
    spec = _spec(attributes=("gender", "region"), intersect=True, tolerance=0.05)
    prepared = whatif.prepare(path, spec, display_name="scores.csv", max_bytes=MAX)
    suggestion = whatif.suggest(prepared, attribute="gender&region")
    assert "m&north" not in suggestion.tpr
    assert suggestion.coarse == ("f&north",)  # about 6 positives: its TPR moves in steps of 1/6 > 0.05
    assert suggestion.reached  # every group at TPR 1 is always reachable: the point gap is met
    assert suggestion.as_json()["coarse"] == ["f&north"]


def test_a_suggestion_over_hundreds_of_intersection_groups_searches_every_level_at_once(tmp_path: Path) -> None:
    """240 groups: 0.13 s here, where one level and one group at a time took 3.2 s (1,000 groups: 0.38 s
    against 13.6 s), with the same thresholds."""
    import time

    rng = np.random.default_rng(1)
    rows = 200_000
    columns: dict[str, Any] = {
        f"a{i}": rng.choice([f"v{j}" for j in range(size)], rows) for i, size in enumerate((8, 6, 5))
    }
    label = (rng.random(rows) < 0.4).astype(np.int8)
    columns.update(label=label, score=np.clip(rng.normal(0.35 + 0.3 * label, 0.2), 0, 1).round(4))
    path = tmp_path / "scores.csv"
    pacsv.write_csv(pa.table(columns), path)
    spec = _spec(attributes=("a0", "a1", "a2"), intersect=True, tolerance=0.05)
    prepared = whatif.prepare(path, spec, display_name="scores.csv", max_bytes=MAX)
    started = time.perf_counter()
    suggestion = whatif.suggest(prepared, attribute=prepared.intersection_key)
    elapsed = time.perf_counter() - started
    assert len(suggestion.tpr) == 240
    assert suggestion.reached
    assert elapsed < 3, elapsed
