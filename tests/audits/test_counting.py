"""The block-by-block fast path counts exactly what the general (decode every column) path counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditportal.fairness.files.tabular import DatasetError, DatasetSpec, RawColumns
from auditportal.fairness.statistics import audit, counting
from auditportal.fairness.statistics.audit import AuditSpec, audit_predictions
from auditportal.fairness.statistics.counting import Counted, count_blocks

GENDERS = ["f", "m", " f", "unknown", "", "x"]
REGIONS = ["north", "south", "NaN", "east"]


def _raw(table: pa.Table) -> RawColumns:
    return RawColumns("csv", table, tuple(table.column_names), "0" * 64, 0)


def _both_fast(table: pa.Table, spec: AuditSpec) -> Counted | None:
    return count_blocks(
        table,
        spec=spec.columns_spec(),
        output=spec.prediction or spec.score or "",
        threshold=spec.threshold if spec.score else None,
        intersect=spec.intersect,
        display_name="p.csv",
    )


def _both(table: pa.Table, spec: AuditSpec) -> tuple[Counted | None, Counted]:
    general = audit._count_decoded(_raw(table), spec.columns_spec(), spec, "p.csv")
    return _both_fast(table, spec), general


def _same(fast: Counted | None, general: Counted) -> None:
    assert fast is not None, "the fast path declined a table it should count"
    assert (fast.positives, fast.predicted_positives) == (general.positives, general.predicted_positives)
    assert [table.name for table in fast.tables] == [table.name for table in general.tables]
    for mine, theirs in zip(fast.tables, general.tables, strict=True):
        assert mine.groups == theirs.groups, mine.name
        np.testing.assert_array_equal(mine.counts, theirs.counts, err_msg=mine.name)
        assert mine.unknown == theirs.unknown, mine.name


def _blocks(rows: int, seed: int, blocks: int, *, text: str, nulls: bool = False) -> pa.Table:
    """A table in ``blocks`` chunks, with text attributes as ``text``: "dictionary" (each chunk with
    its own dictionary, as the CSV reader encodes them), "string" (as in Parquet) or "binary" (as
    the audit's CSV read hands them over)."""
    dictionary = text == "dictionary"
    kind = pa.binary() if text == "binary" else pa.string()
    rng = np.random.default_rng(seed)
    parts = []
    for part in np.array_split(np.arange(rows), blocks):
        n = len(part)
        gender = pa.array(rng.choice(GENDERS, n).tolist(), kind)
        region = rng.choice(REGIONS, n).tolist()
        if nulls:
            region = [None if rng.random() < 0.1 else value for value in region]
        columns: dict[str, Any] = {
            "label": pa.array(rng.integers(0, 2, n), pa.int64()),
            "score": pa.array(rng.random(n).round(2), pa.float64()),
            "pred": pa.array(rng.integers(0, 2, n), pa.int8()),
            "gender": pc.dictionary_encode(gender) if dictionary else gender,
            "region": pc.dictionary_encode(pa.array(region, kind)) if dictionary else pa.array(region, kind),
            "age": pa.array(rng.choice([-1, 20, 30, 40], n), pa.int64()),
        }
        parts.append(pa.table(columns))
    return pa.concat_tables(parts)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    rows=st.integers(1, 400),
    blocks=st.integers(1, 6),
    text=st.sampled_from(["dictionary", "string", "binary"]),
    nulls=st.booleans(),
    attributes=st.sampled_from([("gender",), ("gender", "region"), ("region", "age"), ("gender", "region", "age")]),
    intersect=st.booleans(),
    score=st.booleans(),
    threshold=st.sampled_from([0.0, 0.25, 0.5, 0.99, 1.0]),
    positive=st.sampled_from(["1", "0", "1.0"]),
)
def test_the_fast_path_counts_what_the_general_path_counts(
    seed: int,
    rows: int,
    blocks: int,
    text: str,
    nulls: bool,
    attributes: tuple[str, ...],
    intersect: bool,
    score: bool,
    threshold: float,
    positive: str,
) -> None:
    table = _blocks(rows, seed, min(blocks, rows), text=text, nulls=nulls)
    spec = AuditSpec(
        label="label",
        positive=positive,
        attributes=attributes,
        intersect=intersect and len(attributes) > 1,
        prediction=None if score else "pred",
        score="score" if score else None,
        threshold=threshold if score else None,
    )
    try:
        fast, general = _both(table, spec)
    except DatasetError:  # e.g. a tiny table without the positive value: the general path reports it
        assert _both_fast(table, spec) is None
        return
    _same(fast, general)


@pytest.mark.parametrize("text", ["dictionary", "string", "binary"])
def test_both_threads_count_their_share(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(counting, "_THREADED_ROWS", 1)
    table = _blocks(5_000, 7, 9, text=text, nulls=True)
    for intersect in (False, True):
        spec = AuditSpec(
            label="label", attributes=("gender", "region"), score="score", threshold=0.5, intersect=intersect
        )
        _same(*_both(table, spec))


def test_a_text_attribute_that_is_not_utf8_is_left_to_the_general_path() -> None:
    table = pa.table({"label": [1, 0], "score": [0.1, 0.9], "gender": pa.array([b"f", b"\xf6"], pa.binary())})
    spec = DatasetSpec(label="label", positive="1", attributes=("gender",), features=())
    assert count_blocks(table, spec=spec, output="score", threshold=0.5, intersect=False, display_name="p") is None


def test_a_label_of_other_consecutive_integers_and_an_integer_score_are_counted() -> None:
    rng = np.random.default_rng(3)
    table = pa.table(
        {
            "label": pa.array(rng.integers(1, 3, 300), pa.int16()),  # 1 and 2
            "score": pa.array(rng.integers(0, 100, 300), pa.int32()),
            "gender": pa.array(rng.choice(GENDERS, 300).tolist()),
        }
    )
    for positive in ("2", "1"):
        spec = AuditSpec(label="label", positive=positive, attributes=("gender",), score="score", threshold=50)
        _same(*_both(table, spec))
    # Doubling 100 in int8 would wrap around.
    table = table.set_column(0, "label", pa.array(rng.integers(100, 102, 300), pa.int8()))
    spec = AuditSpec(label="label", positive="101", attributes=("gender",), score="score", threshold=50)
    _same(*_both(table, spec))


def test_a_float32_score_is_compared_in_float64_like_the_general_path() -> None:
    # float32(0.1) = 0.100000001490116 lies below this threshold, but the threshold rounds to it in float32.
    threshold = 0.100000002
    assert float(np.float32(threshold)) < threshold
    scores = np.array([0.1, 0.2, 0.5, 0.05], np.float32)
    table = pa.table({"label": [1, 1, 0, 0], "score": pa.array(scores), "gender": ["f", "m", "f", "m"]})
    spec = AuditSpec(label="label", attributes=("gender",), score="score", threshold=threshold)
    fast, general = _both(table, spec)
    _same(fast, general)
    assert general.predicted_positives == 2


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"label": pa.array([1, 0, None, 1], pa.int64())}, "a missing label"),
        ({"label": pa.array([1, 0, 2, 1], pa.int64())}, "a third label value"),
        ({"label": pa.array(["yes", "no", "no", "yes"])}, "a text label"),
        ({"score": pa.array([0.1, float("nan"), 0.3, 0.4])}, "a NaN score"),
        ({"score": pa.array([0.1, None, 0.3, 0.4], pa.float64())}, "a missing score"),
        ({"score": pa.array(["0.1", "0.2", "0.3", "0.4"])}, "scores as text"),
        ({"gender": pa.array([None, None, None, None], pa.null())}, "an empty attribute"),
    ],
)
def test_anything_unusual_is_left_to_the_general_path(change: dict[str, pa.Array[Any]], why: str) -> None:
    columns: dict[str, pa.Array[Any]] = {
        "label": pa.array([1, 0, 0, 1], pa.int64()),
        "score": pa.array([0.1, 0.2, 0.3, 0.4]),
        "gender": pa.array(["f", "m", "f", "m"]),
        **change,
    }
    spec = DatasetSpec(label="label", positive="1", attributes=("gender",), features=())
    counted = count_blocks(
        pa.table(columns), spec=spec, output="score", threshold=0.5, intersect=False, display_name="p.csv"
    )
    assert counted is None, why


def test_predictions_other_than_0_and_1_and_too_many_groups_are_left_to_the_general_path() -> None:
    table = pa.table({"label": [1, 0, 1], "pred": pa.array([1, 2, 0], pa.int8()), "gender": ["a", "b", "c"]})
    spec = DatasetSpec(label="label", positive="1", attributes=("gender",), features=())
    assert count_blocks(table, spec=spec, output="pred", threshold=None, intersect=False, display_name="p") is None
    table = table.set_column(1, "pred", pa.array([1, 1, 0], pa.int8()))
    assert count_blocks(table, spec=spec, output="pred", threshold=None, intersect=False, display_name="p")
    few = DatasetSpec(label="label", positive="1", attributes=("gender",), features=(), max_groups=2)
    assert count_blocks(table, spec=few, output="pred", threshold=None, intersect=False, display_name="p") is None


@pytest.mark.parametrize("intersect", [False, True])
def test_a_large_csv_file_gives_the_same_document_on_either_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, intersect: bool
) -> None:
    """End to end through the CSV reader (many blocks; attributes dictionary-encoded by the reader):
    the documents are equal."""
    rng = np.random.default_rng(11)
    rows = 120_000
    table = pa.table(
        {
            "label": pa.array(rng.integers(0, 2, rows)),
            "score": pa.array(rng.random(rows).round(3)),
            "gender": pa.array(rng.choice(["f", "m", "unknown", " f "], rows)),
            "region": pa.array(rng.choice(REGIONS, rows)),
        }
    )
    path = tmp_path / "predictions.csv"
    pacsv.write_csv(table, path)
    spec = AuditSpec(label="label", attributes=("gender", "region"), score="score", threshold=0.4, intersect=intersect)
    calls: list[bool] = []

    def spy(table: pa.Table, **kwargs: Any) -> Counted | None:
        assert pa.types.is_dictionary(table.column("gender").type)  # the reader encoded it
        result = count_blocks(table, **kwargs)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(audit, "count_blocks", spy)
    fast = audit_predictions(path, spec, display_name="predictions.csv", max_bytes=1 << 30).document
    monkeypatch.setattr(audit, "count_blocks", lambda *args, **kwargs: None)
    general = audit_predictions(path, spec, display_name="predictions.csv", max_bytes=1 << 30).document
    assert calls == [True]
    assert json.dumps(fast, sort_keys=True) == json.dumps(general, sort_keys=True)
    assert fast["attributes"]["gender"]["unknown"] > 0
    assert set(fast["attributes"]["gender"]["groups"]) == {"f", "m"}
