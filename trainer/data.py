"""Reading the shard directory (docs/shard-format.md, schema 1), the validation split and the
stratified order the batch samplers (:mod:`trainer.loaders`) cut.

Pure pyarrow/numpy: no torch, no Determined, no Django, so the trainer refuses bad shards before it
imports torch. Everything is loaded into memory once; the validation split and both samplers are
deterministic functions of the data and the seed, so a 1-process and an N-process run see exactly
the same validation rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from trainer.groups import GroupLayout, intersection_codes

SHARD_SCHEMA = 1


class ShardError(ValueError):
    """The shard directory does not satisfy the documented format."""


@dataclass(frozen=True)
class Feature:
    name: str
    kind: str  # "numeric" | "categorical"
    mean: float = 0.0
    std: float = 1.0
    categories: tuple[str, ...] = ()


@dataclass(frozen=True)
class ShardSpec:
    """Dataset-wide description shared by every part (taken from the manifest)."""

    target_column: str
    features: tuple[Feature, ...]
    attributes: tuple[tuple[str, str, tuple[str, ...]], ...]  # (name, column, groups)

    @property
    def numeric(self) -> list[Feature]:
        return [f for f in self.features if f.kind == "numeric"]

    @property
    def categorical(self) -> list[Feature]:
        return [f for f in self.features if f.kind == "categorical"]

    @property
    def cardinalities(self) -> list[int]:
        # index 0 is reserved for null/unseen categories
        return [len(f.categories) + 1 for f in self.categorical]

    def layout(self) -> GroupLayout:
        return GroupLayout.from_declared([(name, groups) for name, _, groups in self.attributes])


@dataclass
class EncodedRows:
    """All rows of the shard directory, encoded; row order is part order, then file order."""

    numeric: np.ndarray  # float32 [N, F_num]
    categorical: np.ndarray  # int64 [N, F_cat]
    target: np.ndarray  # float32 [N]
    codes: np.ndarray  # int32 [N, S]: one column per monitored attribute (incl. intersection)
    part: np.ndarray  # int32 [N]: part index of each row
    row_in_part: np.ndarray  # int64 [N]

    def __len__(self) -> int:
        return int(self.target.shape[0])

    def subset(self, idx: np.ndarray) -> EncodedRows:
        return EncodedRows(
            self.numeric[idx],
            self.categorical[idx],
            self.target[idx],
            self.codes[idx],
            self.part[idx],
            self.row_in_part[idx],
        )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ShardError(f"{path} is missing") from None
    except json.JSONDecodeError as exc:
        raise ShardError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ShardError(f"{path} must hold a JSON object")
    return data


def _spec_from(meta: dict[str, Any], where: Path) -> ShardSpec:
    try:
        features = tuple(
            Feature(
                name=f["name"],
                kind=f["kind"],
                mean=float(f.get("mean", 0.0) or 0.0),
                std=float(f.get("std", 1.0) or 1.0),
                categories=tuple(str(c) for c in f.get("categories", [])),
            )
            for f in meta["features"]
        )
        attributes = tuple((a["name"], a["column"], tuple(str(g) for g in a["groups"])) for a in meta["attributes"])
        target = meta["label"].get("target_column", "_target")
    except (KeyError, TypeError) as exc:
        raise ShardError(f"{where}: missing or malformed field {exc}") from None
    for f in features:
        if f.kind not in ("numeric", "categorical"):
            raise ShardError(f"{where}: feature {f.name!r} has unknown kind {f.kind!r}")
    return ShardSpec(target_column=target, features=features, attributes=attributes)


def check_dataset_sha256(root: str | Path, expected: str) -> None:
    """Refuse shards written from other bytes than the dataset version the experiment was launched
    on: the manifest's ``dataset.sha256`` must be ``expected`` (docs/shard-format.md). On a cluster
    the shards are read from a shared directory on the agent host, which may hold another copy."""
    path = Path(root) / "manifest.json"
    manifest = _read_json(path)
    dataset = manifest.get("dataset")
    found = dataset.get("sha256") if isinstance(dataset, dict) else None
    if found != expected.lower():
        raise ShardError(
            f"{path}: dataset.sha256 is {found!r}, but this experiment was launched on {expected.lower()!r}: "
            "these shards were written from other data (a stale or different copy on this host)"
        )


def read_manifest(root: Path) -> tuple[dict[str, Any], ShardSpec]:
    manifest = _read_json(root / "manifest.json")
    if manifest.get("schema") != SHARD_SCHEMA:
        raise ShardError(
            f"{root / 'manifest.json'}: shard schema {manifest.get('schema')!r} is not supported "
            f"(this trainer reads schema {SHARD_SCHEMA})"
        )
    return manifest, _spec_from(manifest, root / "manifest.json")


def float64_column(column: pa.ChunkedArray[Any]) -> np.ndarray:
    """A number column as float64, nulls as NaN: what ``column.to_numpy(zero_copy_only=False)`` gives
    as float64, read from the Arrow buffers, because pyarrow imports pandas for ``to_numpy`` (0.3 to
    0.5 s of every trainer process, which never uses it)."""
    out = np.full(len(column), np.nan, dtype=np.float64)
    if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
        dtype = np.dtype(column.type.to_pandas_dtype())
    else:  # booleans (bits) and the like: converted by Arrow's cast (pyarrow.compute)
        column, dtype = column.cast(pa.float64(), safe=False), np.dtype(np.float64)
    start = 0
    for chunk in column.chunks:
        n, offset = len(chunk), chunk.offset
        validity, values = chunk.buffers()
        if n and values is not None and chunk.null_count < n:  # else every value is null: NaN
            part = out[start : start + n]
            part[:] = np.frombuffer(memoryview(values), dtype=dtype, count=n, offset=offset * dtype.itemsize)
            if chunk.null_count and validity is not None:
                bits = np.unpackbits(np.frombuffer(memoryview(validity), dtype=np.uint8), bitorder="little")
                part[bits[offset : offset + n] == 0] = np.nan
        start += n
    return out


def _encode_part(table: pa.Table, spec: ShardSpec, where: Path) -> tuple[np.ndarray, ...]:
    n = table.num_rows
    missing = [
        c
        for c in [spec.target_column, *(f.name for f in spec.features), *(a[1] for a in spec.attributes)]
        if c not in table.column_names
    ]
    if missing:
        raise ShardError(f"{where}: data.parquet lacks columns {missing}")
    num = np.zeros((n, len(spec.numeric)), dtype=np.float32)
    for j, f in enumerate(spec.numeric):
        col = float64_column(table.column(f.name))
        # Nulls become the dataset mean, i.e. 0 after standardisation.
        num[:, j] = np.nan_to_num((col - f.mean) / f.std, nan=0.0)
    cat = np.zeros((n, len(spec.categorical)), dtype=np.int64)
    for j, f in enumerate(spec.categorical):
        values = table.column(f.name).to_pylist()
        lookup = {c: i + 1 for i, c in enumerate(f.categories)}
        cat[:, j] = [lookup.get(str(v), 0) if v is not None else 0 for v in values]
    target = float64_column(table.column(spec.target_column)).astype(np.float32)
    if not np.isin(target, (0.0, 1.0)).all():
        raise ShardError(f"{where}: {spec.target_column} must hold only 0 and 1")
    codes = []
    for _, column, groups in spec.attributes:
        values = table.column(column).to_pylist()
        lookup = {g: i for i, g in enumerate(groups)}
        unknown = len(groups)
        codes.append(np.array([lookup.get(v, unknown) if v is not None else unknown for v in values]))
    layout = spec.layout()
    if len(spec.attributes) >= 2:
        a, b = layout.attributes[0], layout.attributes[1]
        codes.append(intersection_codes(codes[0], codes[1], a, b))
    code_arr = np.stack(codes, axis=1).astype(np.int32) if codes else np.zeros((n, 0), np.int32)
    return num, cat, target, code_arr


def load_shards(root: str | Path) -> tuple[ShardSpec, EncodedRows]:
    """Read every part, refusing any whose row count differs from its metadata.json."""
    root = Path(root)
    manifest, spec = read_manifest(root)
    part_dirs = manifest.get("part_dirs")
    if not isinstance(part_dirs, list) or not part_dirs:
        raise ShardError(f"{root / 'manifest.json'}: part_dirs must be a non-empty list")
    if manifest.get("parts") != len(part_dirs):
        raise ShardError(f"{root / 'manifest.json'}: parts={manifest.get('parts')} but {len(part_dirs)} part_dirs")
    chunks = []
    total = 0
    for index, name in enumerate(part_dirs):
        part_dir = root / name
        meta = _read_json(part_dir / "metadata.json")
        if meta.get("schema") != SHARD_SCHEMA:
            raise ShardError(f"{part_dir / 'metadata.json'}: unsupported schema {meta.get('schema')!r}")
        if _spec_from(meta, part_dir / "metadata.json") != spec:
            raise ShardError(f"{part_dir / 'metadata.json'}: label/features/attributes differ from manifest.json")
        declared = meta.get("num_examples")
        data_path = part_dir / "data.parquet"
        if not data_path.exists():
            raise ShardError(f"{data_path} is missing")
        # One file read as ParquetFile: pq.read_table would import pyarrow.dataset, and pandas with it
        # (0.3 to 0.7 s of every trainer process), to read the same table.
        with pq.ParquetFile(data_path) as parquet:
            rows = parquet.metadata.num_rows
            if declared != rows:
                raise ShardError(
                    f"shard part {name}: metadata.json declares num_examples={declared} but "
                    f"data.parquet holds {rows} rows; refusing to train on an inconsistent shard "
                    "(re-run shard_dataset)"
                )
            table = parquet.read()
        num, cat, target, codes = _encode_part(table, spec, part_dir)
        chunks.append((num, cat, target, codes, np.full(rows, index, np.int32), np.arange(rows)))
        total += rows
    if manifest.get("num_examples") != total:
        raise ShardError(
            f"{root / 'manifest.json'}: num_examples={manifest.get('num_examples')} but the parts hold {total} rows"
        )
    rows_all = EncodedRows(*(np.concatenate([c[i] for c in chunks]) for i in range(6)))
    return spec, rows_all


def _splitmix64(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def validation_mask(part: np.ndarray, row_in_part: np.ndarray, fraction: float) -> np.ndarray:
    """Row is validation iff splitmix64(part << 32 | row) / 2**64 < fraction.

    Depends only on the row's position in the shard layout, never on the number of workers, and
    is robust to rows being sorted inside a part.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError("val_fraction must be strictly between 0 and 1")
    key = (part.astype(np.uint64) << np.uint64(32)) | row_in_part.astype(np.uint64)
    with np.errstate(over="ignore"):
        h = _splitmix64(key)
    return (h >> np.uint64(11)).astype(np.float64) / float(2**53) < fraction


def strata_of(rows: EncodedRows, n_declared: int, group_sizes: Sequence[int]) -> np.ndarray:
    """Joint stratum: every declared attribute's code (incl. unknown) and the target."""
    stratum = rows.target.astype(np.int64)
    for j in range(n_declared):
        stratum = stratum * (group_sizes[j] + 1) + rows.codes[:, j]
    return stratum


def stratified_order(strata: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A permutation in which every prefix holds each stratum in proportion (within one row).

    Rows of stratum s (shuffled) get keys (k + u) / n_s for their rank k and a uniform u; sorting
    by key interleaves strata evenly, so every contiguous window - and every round-robin slice of
    batches - has nearly the global mix.
    """
    n = strata.shape[0]
    perm = rng.permutation(n)
    s = strata[perm]
    order = np.argsort(s, kind="stable")
    sorted_s = s[order]
    _, starts, sizes = np.unique(sorted_s, return_index=True, return_counts=True)
    stratum_idx = np.repeat(np.arange(len(starts)), sizes)
    rank = np.arange(n) - starts[stratum_idx]
    key = (rank + rng.random(n)) / sizes[stratum_idx]
    return perm[order][np.argsort(key, kind="stable")]
