from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditportal.fairness.files.sharding import (
    AttributeSpec,
    ShardingError,
    ShardSpec,
    check_shards,
    write_shards,
)
from auditportal.fairness.files.tabular import FeatureInfo

UNKNOWN_TOKENS = ("", "nan", "-1", "unknown")
DATASET = {"version_id": 7, "name": "credit-2026", "sha256": "ab" * 32}


def make_spec(attributes: list[AttributeSpec]) -> ShardSpec:
    return ShardSpec(
        label_column="repaid",
        positive="1",
        # row_id is declared as a feature so every row can be traced through the parts.
        features=(
            FeatureInfo("row_id", "numeric"),
            FeatureInfo("income", "numeric"),
            FeatureInfo("region", "categorical"),
        ),
        attributes=tuple(attributes),
        dataset=DATASET,
    )


def make_table(
    rows: int,
    attributes: list[AttributeSpec],
    group_probabilities: list[np.ndarray],
    positive_rate: float,
    seed: int,
) -> pa.Table:
    """A normalized table; each probability vector has one entry per group plus one for unknown."""
    rng = np.random.default_rng(seed)
    income = rng.normal(40_000, 12_000, rows)
    income[rng.random(rows) < 0.02] = np.nan
    columns: dict[str, Any] = {
        "row_id": pa.array(np.arange(rows, dtype=np.float64)),
        "income": pa.array(income, from_pandas=True),
        "region": pa.array(rng.choice(["north", "south", "west"], rows).tolist()),
        "_target": pa.array((rng.random(rows) < positive_rate).astype(np.int8)),
    }
    for attribute, probabilities in zip(attributes, group_probabilities, strict=True):
        codes = rng.choice(len(attribute.groups) + 1, size=rows, p=probabilities)
        values = [attribute.groups[c] if c < len(attribute.groups) else None for c in codes]
        columns[f"_attr.{attribute.name}"] = pa.array(values, type=pa.string())
    return pa.table(columns)


GENDER = AttributeSpec("gender", ("female", "male"), UNKNOWN_TOKENS)
AGE = AttributeSpec("age_group", ("18-29", "30-44", "45-64", "65+"), UNKNOWN_TOKENS)


def credit_table(rows: int = 4_000, seed: int = 1) -> tuple[pa.Table, ShardSpec]:
    attributes = [GENDER, AGE]
    probabilities = [np.array([0.35, 0.57, 0.08]), np.array([0.2, 0.3, 0.3, 0.2, 0.0])]
    return make_table(rows, attributes, probabilities, 0.7, seed), make_spec(attributes)


def read_parts(out_dir: Path) -> list[pd.DataFrame]:
    manifest = json.loads((out_dir / "manifest.json").read_text())
    return [pq.read_table(out_dir / d / "data.parquet").to_pandas() for d in manifest["part_dirs"]]


def read_metadata(out_dir: Path, part: int) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((out_dir / f"part-{part:05d}" / "metadata.json").read_text())
    return result


def write_metadata(out_dir: Path, part: int, metadata: dict[str, Any]) -> None:
    (out_dir / f"part-{part:05d}" / "metadata.json").write_text(json.dumps(metadata))


# The balance guarantee needs parts that are big enough: a group's count in a part is within about
# 2.5 rows of its fair share (measured over thousands of random tables), so a part of n rows can be
# off by about 2.5/n. The precondition here is rows >= 100 * parts, i.e. every part holds at least
# ~100 rows, which leaves about half of the 5-point tolerance spare. Smaller parts cannot be held to
# 5 points by any assignment (7 rows in 3 parts of 3/2/2 with a 4-row group is already 7 points off).
@st.composite
def balance_cases(draw: st.DrawFn) -> dict[str, Any]:
    parts = draw(st.integers(2, 8))
    rows = draw(st.integers(100 * parts, 5_000))
    attributes = []
    probabilities = []
    for index in range(draw(st.integers(1, 3))):
        groups = draw(st.integers(1, 6))
        attributes.append(AttributeSpec(f"a{index}", tuple(f"g{g}" for g in range(groups)), UNKNOWN_TOKENS))
        # Geometric weights make the groups skewed; unknown gets 0-20 %.
        ratio = draw(st.floats(0.2, 1.0))
        weights = ratio ** np.arange(groups, dtype=float)
        unknown = draw(st.floats(0.0, 0.2))
        probabilities.append(np.append(weights / weights.sum() * (1 - unknown), unknown))
    return {
        "parts": parts,
        "rows": rows,
        "attributes": attributes,
        "probabilities": probabilities,
        "positive_rate": draw(st.floats(0.05, 0.95)),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


def column_key(column: str) -> Callable[[pd.DataFrame], pd.Series]:
    return lambda frame: frame[column].fillna("<unknown>")


def intersection_key(first: str, second: str) -> Callable[[pd.DataFrame], pd.Series]:
    # Unknown in either attribute is unknown in the intersection, as in the metadata.
    def key(frame: pd.DataFrame) -> pd.Series:
        pair = frame[first] + "&" + frame[second]
        return pair.fillna("<unknown>")

    return key


@pytest.mark.slow  # about 5 s: 40 examples, each a table sharded and read back
@settings(max_examples=40, deadline=None)
@given(case=balance_cases())
def test_every_part_holds_every_group_within_five_points_of_its_global_share(
    case: dict[str, Any],
) -> None:
    parts = case["parts"]
    table = make_table(
        case["rows"],
        case["attributes"],
        case["probabilities"],
        case["positive_rate"],
        case["seed"],
    )
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp) / "shards"
        write_shards(table, make_spec(case["attributes"]), parts=parts, out_dir=out_dir, seed=3)
        frames = read_parts(out_dir)

    whole = pd.concat(frames, ignore_index=True)
    columns = [f"_attr.{a.name}" for a in case["attributes"]]
    keys: dict[str, Callable[[pd.DataFrame], pd.Series]] = {column: column_key(column) for column in columns}
    if len(columns) >= 2:
        keys["intersection"] = intersection_key(columns[0], columns[1])
    keys["_target"] = lambda frame: frame["_target"].astype(str)

    # Part sizes are balanced only softly: exact sizes would cost the groups' shares.
    sizes = [len(f) for f in frames]
    assert max(sizes) - min(sizes) <= 3
    for name, key in keys.items():
        overall = key(whole).value_counts().to_dict()
        for frame in frames:
            counts = key(frame).value_counts().to_dict()
            for group, total in overall.items():
                if total < parts:
                    continue
                count = counts.get(group, 0)
                # A few rows of slack: that is what the assignment promises beyond the contract.
                assert abs(count - len(frame) * total / len(whole)) <= 3.5, (name, group)
                assert abs(count / len(frame) - total / len(whole)) <= 0.05, (name, group)


def test_every_input_row_lands_in_exactly_one_part_unchanged(tmp_path: Path) -> None:
    table, spec = credit_table()
    write_shards(table, spec, parts=3, out_dir=tmp_path / "shards")

    combined = pd.concat(read_parts(tmp_path / "shards"), ignore_index=True)
    assert combined["row_id"].is_unique
    combined = combined.sort_values("row_id").reset_index(drop=True)
    original = table.to_pandas()
    pd.testing.assert_frame_equal(combined, original[combined.columns], check_dtype=False)
    assert list(combined.columns) == [
        "row_id",
        "income",
        "region",
        "_target",
        "_attr.gender",
        "_attr.age_group",
    ]


def test_parquet_columns_have_the_types_the_format_declares(tmp_path: Path) -> None:
    table, spec = credit_table()
    write_shards(table, spec, parts=2, out_dir=tmp_path / "shards")

    schema = pq.read_schema(tmp_path / "shards" / "part-00000" / "data.parquet")
    assert schema.field("income").type == pa.float64()
    assert schema.field("region").type == pa.string()
    assert schema.field("_target").type == pa.int8()
    assert schema.field("_attr.gender").type == pa.string()


def test_metadata_describes_the_data_of_its_part(tmp_path: Path) -> None:
    table, spec = credit_table()
    out_dir = tmp_path / "shards"
    manifest = write_shards(table, spec, parts=3, out_dir=out_dir)

    original = table.to_pandas()
    for part, frame in enumerate(read_parts(out_dir)):
        metadata = read_metadata(out_dir, part)
        assert metadata["schema"] == 1
        assert (metadata["part"], metadata["parts"]) == (part, 3)
        assert metadata["num_examples"] == len(frame)
        assert metadata["positives"] == int(frame["_target"].sum())
        assert metadata["group_counts"]["gender"] == {
            g: int((frame["_attr.gender"] == g).sum()) for g in ("female", "male")
        }
        assert metadata["unknown_counts"]["gender"] == int(frame["_attr.gender"].isna().sum())
        pair = frame["_attr.gender"] + "&" + frame["_attr.age_group"]
        assert metadata["group_counts"]["gender&age_group"]["female&65+"] == int((pair == "female&65+").sum())
        assert len(metadata["group_counts"]["gender&age_group"]) == 8
        assert metadata["unknown_counts"]["gender&age_group"] == int(pair.isna().sum())
        # Encoding statistics come from the whole table, never the part.
        income = metadata["features"][1]
        assert income["mean"] == pytest.approx(original["income"].mean())
        assert income["std"] == pytest.approx(original["income"].std(ddof=0))
        assert metadata["features"][2]["categories"] == ["north", "south", "west"]
        assert metadata["label"] == {"column": "repaid", "positive": "1", "target_column": "_target"}
        assert metadata["dataset"] == DATASET
        for block in ("label", "features", "attributes", "dataset"):
            assert metadata[block] == manifest[block]

    assert manifest["num_examples"] == table.num_rows
    assert manifest["part_dirs"] == ["part-00000", "part-00001", "part-00002"]
    assert json.loads((out_dir / "manifest.json").read_text()) == manifest
    assert check_shards(out_dir) == []


def test_a_constant_numeric_feature_gets_std_one(tmp_path: Path) -> None:
    table, spec = credit_table(rows=200)
    table = table.set_column(1, "income", pa.array(np.full(200, 5.0)))
    write_shards(table, spec, parts=2, out_dir=tmp_path / "shards")

    income = read_metadata(tmp_path / "shards", 0)["features"][1]
    assert (income["mean"], income["std"]) == (5.0, 1.0)


def test_check_shards_reports_a_num_examples_that_disagrees_with_the_parquet_rows(
    tmp_path: Path,
) -> None:
    table, spec = credit_table(rows=2_000)
    out_dir = tmp_path / "shards"
    write_shards(table, spec, parts=2, out_dir=out_dir)
    metadata = read_metadata(out_dir, 1)
    assert metadata["num_examples"] == 1000
    metadata["num_examples"] = 1002
    write_metadata(out_dir, 1, metadata)

    assert check_shards(out_dir) == ["part-00001: metadata.json says num_examples=1002 but data.parquet has 1000 rows"]


def test_check_shards_reports_rows_missing_from_the_parquet_file(tmp_path: Path) -> None:
    table, spec = credit_table(rows=2_000)
    out_dir = tmp_path / "shards"
    write_shards(table, spec, parts=2, out_dir=out_dir)
    path = out_dir / "part-00001" / "data.parquet"
    pq.write_table(pq.read_table(path).slice(0, 998), path)

    assert "part-00001: metadata.json says num_examples=1000 but data.parquet has 998 rows" in check_shards(out_dir)


def test_check_shards_reports_group_counts_that_do_not_match_the_data(tmp_path: Path) -> None:
    table, spec = credit_table()
    out_dir = tmp_path / "shards"
    write_shards(table, spec, parts=2, out_dir=out_dir)
    metadata = read_metadata(out_dir, 0)
    females = metadata["group_counts"]["gender"]["female"]
    metadata["group_counts"]["gender"]["female"] = females + 5
    write_metadata(out_dir, 0, metadata)

    assert check_shards(out_dir) == [
        f"part-00000: group_counts[gender][female] is {females + 5} in metadata.json but {females} in data.parquet"
    ]


def test_check_shards_reports_missing_files(tmp_path: Path) -> None:
    table, spec = credit_table()
    out_dir = tmp_path / "shards"
    write_shards(table, spec, parts=2, out_dir=out_dir)
    (out_dir / "part-00001" / "data.parquet").unlink()

    assert "part-00001: missing data.parquet" in check_shards(out_dir)
    (out_dir / "manifest.json").unlink()
    assert check_shards(out_dir) == [f"{out_dir / 'manifest.json'} is missing"]


def test_check_shards_reports_a_part_whose_group_share_is_off_balance(tmp_path: Path) -> None:
    table, spec = credit_table(rows=4_000)
    out_dir = tmp_path / "shards"
    write_shards(table, spec, parts=2, out_dir=out_dir)
    # Drop 600 men from part 0 and restate its metadata honestly, so only the balance is wrong.
    path = out_dir / "part-00000" / "data.parquet"
    frame = pq.read_table(path).to_pandas()
    men = frame.index[frame["_attr.gender"] == "male"][:600]
    frame = frame.drop(index=men).reset_index(drop=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    metadata = read_metadata(out_dir, 0)
    metadata["num_examples"] = len(frame)
    metadata["positives"] = int(frame["_target"].sum())
    metadata["group_counts"]["gender"]["male"] -= 600
    pair_counts = (frame["_attr.gender"] + "&" + frame["_attr.age_group"]).value_counts()
    for key in metadata["group_counts"]["gender&age_group"]:
        metadata["group_counts"]["gender&age_group"][key] = int(pair_counts.get(key, 0))
    for group in AGE.groups:
        metadata["group_counts"]["age_group"][group] = int((frame["_attr.age_group"] == group).sum())
    write_metadata(out_dir, 0, metadata)
    manifest = json.loads((out_dir / "manifest.json").read_text())
    manifest["num_examples"] -= 600
    (out_dir / "manifest.json").write_text(json.dumps(manifest))

    whole = pd.concat(read_parts(out_dir), ignore_index=True)
    share = (frame["_attr.gender"] == "female").mean()
    overall = (whole["_attr.gender"] == "female").mean()
    gap = abs(share - overall) * 100
    assert gap > 5
    problems = check_shards(out_dir)
    assert (
        f"part-00000: share of gender=female is {share:.3f} vs {overall:.3f} overall ({gap:.1f} points > 5.0)"
    ) in problems
    assert all(": share of " in p for p in problems)


def test_a_failed_write_leaves_no_shard_directory_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table, spec = credit_table()
    real_write = pq.write_table
    calls: list[object] = []

    def write_failing_on_part_two(data: pa.Table, where: str | Path, **kwargs: Any) -> None:
        calls.append(where)
        if len(calls) == 3:
            raise OSError("disk full")
        real_write(data, where, **kwargs)

    monkeypatch.setattr(pq, "write_table", write_failing_on_part_two)
    with pytest.raises(OSError, match="disk full"):
        write_shards(table, spec, parts=4, out_dir=tmp_path / "shards")

    assert len(calls) == 3
    assert list(tmp_path.iterdir()) == []


def test_a_failed_overwrite_keeps_the_previous_shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table, spec = credit_table()
    out_dir = tmp_path / "shards"
    write_shards(table, spec, parts=2, out_dir=out_dir)
    before = (out_dir / "manifest.json").read_text()

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", fail)
    with pytest.raises(OSError, match="disk full"):
        write_shards(table, spec, parts=3, out_dir=out_dir, overwrite=True)

    assert (out_dir / "manifest.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]
    assert check_shards(out_dir) == []


def test_a_non_empty_destination_is_refused_unless_overwrite_is_passed(tmp_path: Path) -> None:
    table, spec = credit_table()
    out_dir = tmp_path / "shards"
    write_shards(table, spec, parts=2, out_dir=out_dir)

    with pytest.raises(ShardingError, match="exists and is not empty; pass overwrite=True"):
        write_shards(table, spec, parts=3, out_dir=out_dir)

    manifest = write_shards(table, spec, parts=3, out_dir=out_dir, overwrite=True)
    assert manifest["parts"] == 3
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "manifest.json",
        "part-00000",
        "part-00001",
        "part-00002",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]


def test_an_existing_empty_destination_is_used(tmp_path: Path) -> None:
    table, spec = credit_table()
    (tmp_path / "shards").mkdir()
    write_shards(table, spec, parts=2, out_dir=tmp_path / "shards")
    assert check_shards(tmp_path / "shards") == []


def test_the_same_seed_gives_the_same_parts(tmp_path: Path) -> None:
    table, spec = credit_table()
    write_shards(table, spec, parts=3, out_dir=tmp_path / "a", seed=11)
    write_shards(table, spec, parts=3, out_dir=tmp_path / "b", seed=11)
    write_shards(table, spec, parts=3, out_dir=tmp_path / "c", seed=12)

    for part in range(3):
        name = f"part-{part:05d}"
        a = pq.read_table(tmp_path / "a" / name / "data.parquet")
        assert a.equals(pq.read_table(tmp_path / "b" / name / "data.parquet"))
        assert read_metadata(tmp_path / "a", part) == read_metadata(tmp_path / "b", part)
    ids_a = pq.read_table(tmp_path / "a" / "part-00000" / "data.parquet").column("row_id")
    ids_c = pq.read_table(tmp_path / "c" / "part-00000" / "data.parquet").column("row_id")
    assert not ids_a.equals(ids_c)


def test_one_part_holds_the_whole_table(tmp_path: Path) -> None:
    table, spec = credit_table(rows=300)
    manifest = write_shards(table, spec, parts=1, out_dir=tmp_path / "shards")
    assert manifest["part_dirs"] == ["part-00000"]
    assert read_metadata(tmp_path / "shards", 0)["num_examples"] == 300
    assert check_shards(tmp_path / "shards") == []


@pytest.mark.parametrize(
    ("parts", "message"),
    [(0, "parts must be at least 1, got 0"), (301, "cannot split 300 rows into 301 parts")],
)
def test_an_impossible_number_of_parts_is_refused(tmp_path: Path, parts: int, message: str) -> None:
    table, spec = credit_table(rows=300)
    with pytest.raises(ShardingError, match=message):
        write_shards(table, spec, parts=parts, out_dir=tmp_path / "shards")
    assert not (tmp_path / "shards").exists()


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ("_target", "the table has no _target column"),
        ("_attr.age_group", "the table has no _attr.age_group column"),
        ("region", "the table has no feature column 'region'"),
    ],
)
def test_a_table_missing_a_required_column_is_refused(tmp_path: Path, column: str, message: str) -> None:
    table, spec = credit_table(rows=300)
    table = table.drop_columns([column])
    with pytest.raises(ShardingError, match=message):
        write_shards(table, spec, parts=2, out_dir=tmp_path / "shards")


def test_an_attribute_value_outside_the_declared_groups_is_refused(tmp_path: Path) -> None:
    table, spec = credit_table(rows=300)
    values = table.column("_attr.gender").to_pylist()
    values[5] = "unknown"
    table = table.set_column(4, "_attr.gender", pa.array(values, type=pa.string()))
    with pytest.raises(ShardingError, match=r"outside the declared groups.*'unknown'"):
        write_shards(table, spec, parts=2, out_dir=tmp_path / "shards")
