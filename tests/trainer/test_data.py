"""Reading the shard directory and sampling it across workers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tests.trainer.trainer_testkit import (
    make_demo_frame,
    skewed_assignment,
    stratified_assignment,
    write_shard_dir,
)
from trainer.data import (
    ShardError,
    check_dataset_sha256,
    float64_column,
    load_shards,
    strata_of,
    validation_mask,
)
from trainer.loaders import GroupAwareBatchSampler


@pytest.fixture(scope="module")
def demo_frame():
    return make_demo_frame(3000, seed=4)


def test_num_examples_mismatch_is_refused_with_a_clear_message(tmp_path: Path, demo_frame) -> None:
    root = write_shard_dir(demo_frame, tmp_path / "shards", stratified_assignment(demo_frame, 2))
    meta_path = root / "part-00001" / "metadata.json"
    meta = json.loads(meta_path.read_text())
    actual = meta["num_examples"]
    meta["num_examples"] = actual + 5
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ShardError) as excinfo:
        load_shards(root)
    assert str(excinfo.value) == (
        f"shard part part-00001: metadata.json declares num_examples={actual + 5} but data.parquet "
        f"holds {actual} rows; refusing to train on an inconsistent shard (re-run shard_dataset)"
    )


def test_shards_of_another_dataset_are_refused_before_training(
    tmp_path: Path, demo_frame, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_shard_dir(demo_frame, tmp_path / "shards", stratified_assignment(demo_frame, 2))
    written = json.loads((root / "manifest.json").read_text())["dataset"]["sha256"]
    check_dataset_sha256(root, written.upper())  # the launch's hash, however it is written
    launched = "ab" * 32
    with pytest.raises(ShardError) as excinfo:
        check_dataset_sha256(root, launched)
    assert str(excinfo.value) == (
        f"{root / 'manifest.json'}: dataset.sha256 is {written!r}, but this experiment was launched on "
        f"{launched!r}: these shards were written from other data (a stale or different copy on this host)"
    )
    # The trainer stops with it before anything starts (no Determined context is created).
    from trainer.train import main

    assert main(["--data", str(root), "--batches", "3", "--dataset-sha256", launched]) == 2
    assert f"trainer: refused shards: {excinfo.value}" in capsys.readouterr().err


def test_unsupported_schema_is_refused(tmp_path: Path, demo_frame) -> None:
    root = write_shard_dir(demo_frame, tmp_path / "shards", stratified_assignment(demo_frame, 2))
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["schema"] = 2
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ShardError, match="shard schema 2 is not supported"):
        load_shards(root)


def test_rows_are_encoded_as_the_format_documents(tmp_path: Path, demo_frame) -> None:
    root = write_shard_dir(demo_frame, tmp_path / "shards", np.zeros(len(demo_frame), dtype=np.int64))
    spec, rows = load_shards(root)
    assert len(rows) == len(demo_frame)
    income = demo_frame["income"].to_numpy()
    j = [f.name for f in spec.numeric].index("income")
    null = np.isnan(income)
    assert null.any()
    np.testing.assert_array_equal(rows.numeric[null, j], 0.0)  # null -> mean -> 0 standardised
    mean, std = np.nanmean(income), np.nanstd(income)
    np.testing.assert_allclose(rows.numeric[~null, j], (income[~null] - mean) / std, rtol=1e-5, atol=1e-5)
    region = demo_frame["region"]
    cats = spec.categorical[0].categories
    expected = [0 if v is None or v != v else cats.index(v) + 1 for v in region]
    np.testing.assert_array_equal(rows.categorical[:, 0], expected)
    gender = demo_frame["_attr.gender"]
    np.testing.assert_array_equal(rows.codes[:, 0] == 2, gender.isna().to_numpy())  # unknown code
    both_known = gender.notna().to_numpy()
    assert (rows.codes[~both_known, 2] == 6).all()  # intersection unknown = 2 * 3


@pytest.mark.parametrize(
    "column",
    [
        # sliced (an offset into the buffers), several chunks, a chunk of nulls only, an empty one
        pa.chunked_array(
            [
                pa.array([1.5, None, 3.0, 4.0, None, 6.0, 7.0, 8.0, 9.0, None, 11.0]).slice(3),
                pa.array([None, None], pa.float64()),
                pa.array([], pa.float64()),
                pa.array([-0.0, 2.5e300]),
            ]
        ),
        pa.chunked_array([pa.array([1, None, 0, 1], pa.int8()).slice(1), pa.array([None], pa.int8())]),
        pa.chunked_array([pa.array(list(range(20)) + [None] * 5, pa.int64()).slice(17, 6)]),
        pa.chunked_array([pa.array([True, False, None])]),
        pa.chunked_array([pa.nulls(3)]),
        pa.chunked_array([pa.array([0.25, 7.0], pa.float32())]),
    ],
    ids=["float64", "int8", "int64", "bool", "null", "float32"],
)
def test_number_columns_are_read_as_to_numpy_reads_them(column: pa.ChunkedArray[Any]) -> None:
    # The reader takes them from the Arrow buffers: pyarrow imports pandas for to_numpy.
    expected = column.to_numpy(zero_copy_only=False).astype(np.float64)
    got = float64_column(column)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, expected)  # NaN where null, in the same places


def test_validation_split_is_a_stable_function_of_part_and_row() -> None:
    part = np.repeat(np.arange(3), 10_000)
    row = np.tile(np.arange(10_000), 3)
    first = validation_mask(part, row, 0.2)
    np.testing.assert_array_equal(first, validation_mask(part, row, 0.2))
    assert abs(first.mean() - 0.2) < 0.01
    # A part's rows are not split as a contiguous tail, so sorted parts still validate on a mix.
    assert 0.15 < first[:5000].mean() < 0.25


def _rank_mix(sampler: GroupAwareBatchSampler, codes: np.ndarray, world: int, n_groups: int) -> np.ndarray:
    mixes = np.zeros((world, n_groups))
    for i, batch in enumerate(sampler):  # Determined deals batch i to rank i % world
        mixes[i % world] += np.bincount(codes[batch], minlength=n_groups)
    shares: np.ndarray = mixes / mixes.sum(axis=1, keepdims=True)
    return shares


@pytest.mark.parametrize("world", [2, 3, 4])
def test_stratified_sampler_gives_every_worker_the_global_group_mix_on_skewed_parts(
    tmp_path: Path,
    demo_frame,
    world: int,
) -> None:
    root = write_shard_dir(demo_frame, tmp_path / "shards", skewed_assignment(demo_frame))
    _, rows = load_shards(root)
    strata = strata_of(rows, 2, [2, 3])
    sampler = GroupAwareBatchSampler(strata, 32, world, mode="stratified", seed=1)
    for column, n_groups in ((0, 3), (1, 4), (2, 7)):
        codes = rows.codes[:, column]
        global_mix = np.bincount(codes, minlength=n_groups) / len(codes)
        mixes = _rank_mix(sampler, codes, world, n_groups)
        assert np.abs(mixes - global_mix).max() < 0.05


def test_plain_sampler_on_skewed_parts_gives_workers_different_populations(tmp_path: Path, demo_frame) -> None:
    root = write_shard_dir(demo_frame, tmp_path / "shards", skewed_assignment(demo_frame))
    _, rows = load_shards(root)
    sampler = GroupAwareBatchSampler(strata_of(rows, 2, [2, 3]), 32, 2, mode="plain", seed=1)
    mixes = _rank_mix(sampler, rows.codes[:, 0], 2, 3)
    assert mixes[0, 0] - mixes[1, 0] > 0.4  # rank 0 reads mostly the female-heavy part


def test_sampler_epochs_differ_but_depend_only_on_seed_and_epoch() -> None:
    strata = np.random.default_rng(0).integers(0, 6, 1000)
    a = GroupAwareBatchSampler(strata, 50, 2, mode="stratified", seed=3)
    b = GroupAwareBatchSampler(strata, 50, 2, mode="stratified", seed=3)
    a1, a2 = list(a), list(a)
    assert a1 == list(b)
    assert a1 != a2
    assert sorted(i for batch in a1 for i in batch) == list(range(1000))


def test_shards_written_by_the_portal_writer_are_readable(tmp_path: Path, demo_frame) -> None:
    sharding = pytest.importorskip("auditportal.fairness.files.sharding")
    FeatureInfo = pytest.importorskip("auditportal.fairness.files.tabular").FeatureInfo
    table = pa.Table.from_pandas(demo_frame, preserve_index=False)
    spec = sharding.ShardSpec(
        label_column="label",
        positive="1",
        features=(
            FeatureInfo("signal", "numeric"),
            FeatureInfo("proxy", "numeric"),
            FeatureInfo("income", "numeric"),
            FeatureInfo("region", "categorical"),
        ),
        attributes=(
            sharding.AttributeSpec("gender", ("female", "male"), ("", "unknown")),
            sharding.AttributeSpec("age_group", ("18-29", "30-44", "45+"), ("", "unknown")),
        ),
        dataset={"version_id": 1, "name": "demo", "sha256": "0" * 64},
    )
    sharding.write_shards(table, spec, parts=3, out_dir=tmp_path / "portal")
    trainer_spec, rows = load_shards(tmp_path / "portal")
    assert len(rows) == len(demo_frame)
    assert [a[0] for a in trainer_spec.attributes] == ["gender", "age_group"]
    assert int(rows.target.sum()) == int(demo_frame["_target"].sum())
    assert int((rows.codes[:, 0] == 2).sum()) == int(demo_frame["_attr.gender"].isna().sum())
