"""The pair of groups that sets the trainer's eod at each validation, and its noise floor."""

from __future__ import annotations

import numpy as np
import pytest

from auditportal.fairness.statistics import judge, stats
from auditportal.fairness.statistics.eod import CountSeries, eod_pairs


def _cells(tp: int, fn: int) -> list[int]:
    return [tp, fn, 10, 90]


def test_the_pair_is_the_highest_and_lowest_recall_of_the_attribute_with_the_largest_gap() -> None:
    gender = CountSeries(
        groups=("female", "male"),
        counts=np.array([[_cells(40, 60), _cells(80, 20)], [_cells(70, 30), _cells(72, 28)]]),
    )
    age = CountSeries(
        groups=("middle", "old", "young"),
        counts=np.array(
            [
                [_cells(50, 50), _cells(45, 55), _cells(55, 45)],
                [_cells(60, 40), _cells(5, 5), _cells(90, 10)],
            ]
        ),
    )
    first, second = eod_pairs({"gender": gender, "age": age}, steps=2, alpha=0.05)
    assert first is not None
    assert second is not None
    assert (first.attribute, first.high, first.low) == ("gender", "male", "female")
    assert first.gap == pytest.approx(0.4)
    assert (second.attribute, second.high, second.low) == ("age", "young", "old")
    assert second.gap == pytest.approx(0.4)


def test_the_floor_is_the_verdicts_two_sample_noise_floor_of_the_pair() -> None:
    rng = np.random.default_rng(7)
    groups = ("a", "b", "c", "d")
    positives = np.array([400, 60, 900, 25])
    tp = rng.binomial(positives, [0.7, 0.5, 0.8, 0.6], size=(50, 4))
    counts = np.stack([tp, positives - tp, np.full((50, 4), 30), np.full((50, 4), 300)], axis=-1)
    pairs = eod_pairs({"race": CountSeries(groups, counts)}, steps=50, alpha=0.05)
    for step, pair in enumerate(pairs):
        assert pair is not None
        recall = tp[step] / positives
        assert pair.gap == pytest.approx(recall.max() - recall.min())
        high, low = groups.index(pair.high), groups.index(pair.low)
        assert (recall[high], recall[low]) == (recall.max(), recall.min())
        # The oracle: stats.compare with the lower group as the reference, as a verdict compares.
        oracle = stats.compare(counts[step], reference=low, alpha=0.05)["tpr"]
        assert pair.noise_floor == pytest.approx(float(oracle.noise_floor[high]), rel=1e-12)
        assert int(oracle.family_size) == 3


def test_when_the_pair_holds_the_reference_its_floor_is_the_one_the_verdict_document_stores() -> None:
    # a (the reference) and c set the eod; b, small, has a's recall and the widest floor.
    counts = np.array([_cells(900, 100), _cells(45, 5), _cells(600, 400)])
    groups = ["a", "b", "c"]
    section = judge.judge_attribute(counts, groups, unknown=0, reference=0, alpha=0.05)
    (pair,) = eod_pairs({"x": CountSeries(groups, counts[None])}, steps=1, alpha=0.05)
    assert pair is not None
    assert pair.noise_floor is not None
    assert (pair.high, pair.low) == ("a", "c")
    stored = {c["group"]: c["noise_floor"] for c in section["comparisons"] if c["metric"] == "tpr"}
    assert pair.noise_floor == pytest.approx(stored["c"], rel=1e-12)
    # The attribute's widest floor (what the timeline used to shade) is b's, twice as wide.
    assert judge.recall_noise_floor(section) == stored["b"] > 2 * pair.noise_floor


def test_groups_without_positives_are_left_out_and_one_group_left_gives_no_pair() -> None:
    counts = np.array([[_cells(0, 0), _cells(30, 70), _cells(60, 40)], [_cells(0, 0), _cells(0, 0), _cells(5, 5)]])
    first, second = eod_pairs({"x": CountSeries(("a", "b", "c"), counts)}, steps=2, alpha=0.05)
    assert first is not None
    assert (first.high, first.low) == ("c", "b")
    assert second is None


def test_equal_recalls_still_name_two_groups_with_a_floor() -> None:
    counts = np.array([[_cells(50, 50), _cells(20, 20), _cells(0, 0)]])
    (pair,) = eod_pairs({"x": CountSeries(("a", "b", "c"), counts)}, steps=1, alpha=0.05)
    assert pair is not None
    assert pair.gap == 0
    assert {pair.high, pair.low} == {"a", "b"}
    assert pair.noise_floor is not None
    assert pair.noise_floor > 0


def test_equal_gaps_across_attributes_take_the_pair_with_the_larger_floor() -> None:
    big = CountSeries(("f", "m"), np.array([[_cells(400, 600), _cells(500, 500)]]))
    small = CountSeries(("x", "y"), np.array([[_cells(4, 6), _cells(5, 5)]]))
    (pair,) = eod_pairs({"a": big, "b": small}, steps=1, alpha=0.05)
    assert pair is not None
    assert pair.attribute == "b"


def test_counts_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(ValueError, match="expected"):
        eod_pairs({"x": CountSeries(("a", "b"), np.zeros((3, 2, 4), dtype=np.int64))}, steps=2, alpha=0.05)
