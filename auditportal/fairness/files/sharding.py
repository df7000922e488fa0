from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from auditportal.fairness.errors import UserError
from auditportal.fairness.files.intersections import attribute_key, group_key
from auditportal.fairness.files.tabular.spec import ATTRIBUTE_PREFIX, TARGET_COLUMN, FeatureInfo

# The on-disk contract is docs/shard-format.md; the trainer reads it without importing this module
# (tests write shards here and read them with trainer/data.py). The column names are the normalised
# table's (fairness.files.tabular.spec), which is what the shards hold.
SCHEMA = 1
MANIFEST_NAME = "manifest.json"
METADATA_NAME = "metadata.json"
DATA_NAME = "data.parquet"


@dataclass(frozen=True)
class AttributeSpec:
    name: str
    groups: tuple[str, ...]
    unknown_tokens: tuple[str, ...]


@dataclass(frozen=True)
class ShardSpec:
    label_column: str
    positive: str
    features: tuple[FeatureInfo, ...]
    attributes: tuple[AttributeSpec, ...]
    dataset: Mapping[str, object]


class ShardingError(UserError):
    pass


def attribute_column(name: str) -> str:
    return f"{ATTRIBUTE_PREFIX}{name}"


def part_dir_name(part: int) -> str:
    return f"part-{part:05d}"


def write_shards(
    table: pa.Table,
    spec: ShardSpec,
    *,
    parts: int,
    out_dir: Path,
    seed: int = 0,
    overwrite: bool = False,
) -> dict[str, object]:
    """Split a normalized table into `parts` stratified parts under `out_dir`; return the manifest.

    The directory appears complete or not at all: everything is written into a hidden sibling and
    renamed into place. A process killed mid-write can leave that hidden `.<name>.tmp-*` sibling
    behind, never a partial `out_dir`.
    """
    import pyarrow.parquet as pq  # here: every command loads this module (0.02 s to import)

    out_dir = Path(out_dir)
    _check_parts(parts, table.num_rows)
    _check_destination(out_dir, overwrite=overwrite)

    target = _target_codes(table)
    attr_codes = [_attribute_codes(table, attr) for attr in spec.attributes]
    features = [_feature_block(table, feature) for feature in spec.features]
    data = _output_table(table, spec)

    assignment = _assign_parts(attr_codes, [len(a.groups) for a in spec.attributes], target, parts, seed)

    shared: dict[str, object] = {
        "label": {
            "column": spec.label_column,
            "positive": spec.positive,
            "target_column": TARGET_COLUMN,
        },
        "features": features,
        "attributes": [
            {
                "name": a.name,
                "column": attribute_column(a.name),
                "groups": list(a.groups),
                "unknown_tokens": list(a.unknown_tokens),
            }
            for a in spec.attributes
        ],
        "dataset": dict(spec.dataset),
    }
    part_dirs = [part_dir_name(p) for p in range(parts)]
    manifest: dict[str, object] = {
        "schema": SCHEMA,
        "parts": parts,
        "num_examples": table.num_rows,
        "part_dirs": part_dirs,
        **shared,
    }
    # Fail on a non-JSON dataset block before any file is written.
    _to_json(manifest)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    tmp_dir.mkdir()
    try:
        # A stable sort keeps each part's rows in input order, which is also deterministic.
        by_part = np.argsort(assignment, kind="stable")
        bounds = np.searchsorted(assignment[by_part], np.arange(parts + 1))
        for p in range(parts):
            rows = by_part[bounds[p] : bounds[p + 1]]
            part_path = tmp_dir / part_dirs[p]
            part_path.mkdir()
            pq.write_table(data.take(rows), part_path / DATA_NAME)
            _fsync_file(part_path / DATA_NAME)
            counts = _group_counts(spec.attributes, [codes[rows] for codes in attr_codes])
            metadata = {
                "schema": SCHEMA,
                "part": p,
                "parts": parts,
                "num_examples": int(rows.size),
                "positives": int(target[rows].sum()),
                **shared,
                **counts,
            }
            _write_json(part_path / METADATA_NAME, metadata)
            _fsync_dir(part_path)
        _write_json(tmp_dir / MANIFEST_NAME, manifest)
        _fsync_dir(tmp_dir)
        _move_into_place(tmp_dir, out_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return manifest


def check_shards(out_dir: Path, *, tolerance: float = 0.05) -> list[str]:
    """Re-read every part and return human-readable problems; an empty list means all good."""
    import pyarrow.parquet as pq  # here: every command loads this module (0.02 s to import)

    out_dir = Path(out_dir)
    try:
        manifest = json.loads((out_dir / MANIFEST_NAME).read_text())
    except FileNotFoundError:
        return [f"{out_dir / MANIFEST_NAME} is missing"]
    except (OSError, ValueError) as exc:
        return [f"{out_dir / MANIFEST_NAME} cannot be read: {exc}"]

    problems: list[str] = []
    try:
        parts = int(manifest["parts"])
        part_dirs = [str(d) for d in manifest["part_dirs"]]
        attributes = [
            AttributeSpec(a["name"], tuple(a["groups"]), tuple(a.get("unknown_tokens", ())))
            for a in manifest["attributes"]
        ]
        features = [f["name"] for f in manifest["features"]]
    except (KeyError, TypeError, ValueError) as exc:
        return [f"manifest.json is malformed: {exc!r}"]
    if part_dirs != [part_dir_name(p) for p in range(parts)]:
        problems.append(f"manifest.json: part_dirs do not list part-00000..part-{parts - 1:05d}")

    expected_columns = [*features, TARGET_COLUMN, *(attribute_column(a.name) for a in attributes)]
    part_rows: dict[str, int] = {}
    part_counts: dict[str, dict[str, Any]] = {}
    for index, name in enumerate(part_dirs):
        metadata_path = out_dir / name / METADATA_NAME
        data_path = out_dir / name / DATA_NAME
        missing = [p.name for p in (metadata_path, data_path) if not p.is_file()]
        if missing:
            problems.append(f"{name}: missing {', '.join(missing)}")
            continue
        try:
            metadata = json.loads(metadata_path.read_text())
            data = pq.read_table(data_path)
        except (OSError, ValueError, pa.ArrowException) as exc:
            problems.append(f"{name}: cannot be read: {exc}")
            continue

        if metadata.get("part") != index or metadata.get("parts") != parts:
            problems.append(
                f"{name}: metadata.json says part {metadata.get('part')} of "
                f"{metadata.get('parts')}, manifest.json says part {index} of {parts}"
            )
        for block in ("label", "features", "attributes", "dataset"):
            if metadata.get(block) != manifest.get(block):
                problems.append(f"{name}: metadata.json {block!r} differs from manifest.json")
        if metadata.get("num_examples") != data.num_rows:
            problems.append(
                f"{name}: metadata.json says num_examples={metadata.get('num_examples')} "
                f"but data.parquet has {data.num_rows} rows"
            )
        absent = [c for c in expected_columns if c not in data.column_names]
        if absent:
            problems.append(f"{name}: data.parquet lacks columns {', '.join(absent)}")
            continue

        positives = int(pc.sum(data.column(TARGET_COLUMN).cast(pa.int64())).as_py() or 0)
        if metadata.get("positives") != positives:
            problems.append(
                f"{name}: metadata.json says positives={metadata.get('positives')} but data.parquet has {positives}"
            )
        codes = []
        for attr in attributes:
            attr_codes, stray = _codes_and_stray(data.column(attribute_column(attr.name)), attr)
            if stray:
                problems.append(
                    f"{name}: {attribute_column(attr.name)} has undeclared values {', '.join(map(repr, stray))}"
                )
            codes.append(attr_codes)
        actual = _group_counts(attributes, codes)
        for block in ("group_counts", "unknown_counts"):
            problems.extend(
                f"{name}: {block}[{key}] is {claimed} in metadata.json but {found} in data.parquet"
                for key, claimed, found in _diff_counts(metadata.get(block), actual[block])
            )
        part_rows[name] = data.num_rows
        part_counts[name] = actual["group_counts"]

    if not problems and manifest.get("num_examples") != sum(part_rows.values()):
        problems.append(
            f"manifest.json says num_examples={manifest.get('num_examples')} "
            f"but the parts hold {sum(part_rows.values())} rows"
        )
    problems.extend(_balance_problems(part_rows, part_counts, parts, tolerance))
    return problems


def _balance_problems(
    part_rows: Mapping[str, int],
    part_counts: Mapping[str, Mapping[str, Mapping[str, int]]],
    parts: int,
    tolerance: float,
) -> list[str]:
    total = sum(part_rows.values())
    if not total:
        return []
    problems: list[str] = []
    overall: dict[tuple[str, str], int] = {}
    for counts in part_counts.values():
        for attribute, groups in counts.items():
            for group, count in groups.items():
                overall[attribute, group] = overall.get((attribute, group), 0) + count
    for name, rows in part_rows.items():
        if rows == 0:
            problems.append(f"{name}: data.parquet has no rows")
            continue
        for attribute, groups in part_counts[name].items():
            for group, count in groups.items():
                global_count = overall[attribute, group]
                # The contract promises balance only for groups that can have a row in every part.
                if global_count < parts:
                    continue
                share, global_share = count / rows, global_count / total
                gap = abs(share - global_share)
                if gap > tolerance + 1e-12:
                    problems.append(
                        f"{name}: share of {attribute}={group} is {share:.3f} vs "
                        f"{global_share:.3f} overall ({gap * 100:.1f} points > "
                        f"{tolerance * 100:.1f})"
                    )
    return problems


def _diff_counts(claimed: object, actual: Mapping[str, object]) -> list[tuple[str, object, object]]:
    if not isinstance(claimed, Mapping):
        return [("*", claimed, "a mapping")]
    diffs: list[tuple[str, object, object]] = []
    for key in sorted(set(claimed) | set(actual)):
        want, have = claimed.get(key), actual.get(key)
        if isinstance(have, Mapping):
            inner = want if isinstance(want, Mapping) else {}
            for group in sorted(set(inner) | set(have)):
                if inner.get(group) != have.get(group):
                    diffs.append((f"{key}][{group}", inner.get(group), have.get(group)))
        elif want != have:
            diffs.append((key, want, have))
    return diffs


def _check_parts(parts: int, rows: int) -> None:
    if parts < 1:
        raise ShardingError(f"parts must be at least 1, got {parts}")
    if parts > rows:
        raise ShardingError(f"cannot split {rows} rows into {parts} parts")


def _check_destination(out_dir: Path, *, overwrite: bool) -> None:
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise ShardingError(f"{out_dir} exists and is not a directory")
    if any(out_dir.iterdir()) and not overwrite:
        raise ShardingError(f"{out_dir} exists and is not empty; pass overwrite=True to replace it")


def _target_codes(table: pa.Table) -> np.ndarray:
    if TARGET_COLUMN not in table.column_names:
        raise ShardingError(f"the table has no {TARGET_COLUMN} column")
    column = table.column(TARGET_COLUMN)
    if not (pa.types.is_integer(column.type) or pa.types.is_boolean(column.type)):
        raise ShardingError(f"{TARGET_COLUMN} must be int8, got {column.type}")
    if column.null_count:
        raise ShardingError(f"{TARGET_COLUMN} has {column.null_count} null values")
    values = column.to_numpy().astype(np.int64)
    if values.size and (values.min() < 0 or values.max() > 1):
        raise ShardingError(f"{TARGET_COLUMN} must hold only 0 and 1")
    return values.astype(np.int8)


def _codes_and_stray(column: pa.ChunkedArray[Any], attribute: AttributeSpec) -> tuple[np.ndarray, list[str]]:
    """Group index per row (len(groups) for unknown) and up to five undeclared values."""
    groups = pa.array(list(attribute.groups), type=pa.string())
    strings = column.cast(pa.string())
    index = pc.index_in(strings, value_set=groups)
    stray_mask = pc.and_(pc.is_null(index), pc.is_valid(strings))
    stray = pc.unique(pc.filter(strings, stray_mask)).to_pylist()[:5]
    codes = index.fill_null(len(attribute.groups)).to_numpy().astype(np.int64)
    return codes, [str(s) for s in stray]


def _attribute_codes(table: pa.Table, attribute: AttributeSpec) -> np.ndarray:
    column_name = attribute_column(attribute.name)
    if column_name not in table.column_names:
        raise ShardingError(f"the table has no {column_name} column")
    if len(set(attribute.groups)) != len(attribute.groups):
        raise ShardingError(f"attribute {attribute.name!r} declares a group twice")
    column = table.column(column_name)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise ShardingError(f"{column_name} must be a string column, got {column.type}")
    codes, stray = _codes_and_stray(column, attribute)
    if stray:
        # Unknown tokens should have been mapped to null upstream; anything left is a group the
        # manifest cannot describe, so refuse rather than silently count it as unknown.
        raise ShardingError(
            f"{column_name} has values outside the declared groups {list(attribute.groups)}: "
            f"{', '.join(map(repr, stray))}"
        )
    return codes


def _feature_block(table: pa.Table, feature: FeatureInfo) -> dict[str, object]:
    if feature.name not in table.column_names:
        raise ShardingError(f"the table has no feature column {feature.name!r}")
    column = table.column(feature.name)
    if feature.kind == "numeric":
        if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
            raise ShardingError(f"numeric feature {feature.name!r} has type {column.type}")
        values = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
        present = values[~np.isnan(values)]
        if not np.isfinite(present).all():
            raise ShardingError(f"numeric feature {feature.name!r} has infinite values")
        # Population std (ddof=0); an all-null column gets mean 0 so the JSON stays valid.
        mean = float(present.mean()) if present.size else 0.0
        std = float(present.std()) if present.size else 0.0
        return {"name": feature.name, "kind": "numeric", "mean": mean, "std": std or 1.0}
    if feature.kind == "categorical":
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise ShardingError(f"categorical feature {feature.name!r} has type {column.type}")
        categories = sorted(str(v) for v in pc.unique(column.drop_null()).to_pylist())
        return {"name": feature.name, "kind": "categorical", "categories": categories}
    raise ShardingError(f"feature {feature.name!r} has unknown kind {feature.kind!r}")


def _output_table(table: pa.Table, spec: ShardSpec) -> pa.Table:
    columns: dict[str, pa.Array[Any]] = {}
    for feature in spec.features:
        column = table.column(feature.name)
        kind = pa.float64() if feature.kind == "numeric" else pa.string()
        columns[feature.name] = column.cast(kind).combine_chunks()
    columns[TARGET_COLUMN] = table.column(TARGET_COLUMN).cast(pa.int8()).combine_chunks()
    for attribute in spec.attributes:
        name = attribute_column(attribute.name)
        columns[name] = table.column(name).cast(pa.string()).combine_chunks()
    return pa.table(columns)


def _assign_parts(
    attr_codes: Sequence[np.ndarray],
    group_sizes: Sequence[int],
    target: np.ndarray,
    parts: int,
    seed: int,
) -> np.ndarray:
    """Part index per row, stratified on (every attribute incl. unknown, target)."""
    rng = np.random.default_rng(seed)
    n = target.size
    radices = [size + 1 for size in group_sizes] + [2]
    stratum = np.zeros(n, dtype=np.int64)
    for codes, radix in zip([*attr_codes, target], radices, strict=True):
        stratum = stratum * radix + codes

    # Shuffle, then stable-sort by stratum: rows of a stratum become contiguous in random order.
    shuffled = rng.permutation(n)
    order = shuffled[np.argsort(stratum[shuffled], kind="stable")]
    strata, starts, sizes = np.unique(stratum[order], return_index=True, return_counts=True)

    # Every part gets floor(c/K) rows of each stratum by dealing round-robin.
    position = np.arange(n) - np.repeat(starts, sizes)
    assignment_sorted = (position % parts).astype(np.int32)

    # The c mod K leftovers go, one per part, to the parts that so far hold the fewest leftover
    # rows of the groups the stratum belongs to. Only leftovers differ between parts, so keeping
    # them level keeps every group's count per part within about a row of c_g/K.
    decoded = _decode_strata(strata, radices)
    counters = [np.zeros((radix, parts), dtype=np.int64) for radix in radices]
    if len(group_sizes) >= 2:
        counters.append(np.zeros((radices[0] * radices[1], parts), dtype=np.int64))
    part_sizes = np.zeros(parts, dtype=np.int64)
    remainders = sizes % parts
    # Strata are visited in code order, so the strata of one group of the first attribute come
    # one after another and each group is levelled before the next starts (this measured better
    # than largest-leftover-first or random order).
    for i in range(strata.size):
        r = int(remainders[i])
        if r == 0:
            continue
        rows_of = [decoded[j][i] for j in range(len(radices))]
        if len(group_sizes) >= 2:
            rows_of.append(decoded[0][i] * radices[1] + decoded[1][i])
        score = sum(counter[row] for counter, row in zip(counters, rows_of, strict=True))
        # Part sizes count double: heavier weights keep sizes within one row but let the groups
        # drift further apart, and it is the groups' shares that the contract bounds.
        score = score + 2 * part_sizes
        chosen = np.lexsort((rng.random(parts), score))[:r]
        for counter, row in zip(counters, rows_of, strict=True):
            counter[row, chosen] += 1
        part_sizes[chosen] += 1
        start = starts[i] + sizes[i] - r
        assignment_sorted[start : starts[i] + sizes[i]] = chosen

    assignment = np.empty(n, dtype=np.int32)
    assignment[order] = assignment_sorted
    return assignment


def _decode_strata(strata: np.ndarray, radices: Sequence[int]) -> list[np.ndarray]:
    digits: list[np.ndarray] = []
    rest = strata.copy()
    for radix in reversed(radices):
        digits.append(rest % radix)
        rest //= radix
    return digits[::-1]


def _group_counts(attributes: Sequence[AttributeSpec], codes: Sequence[np.ndarray]) -> dict[str, dict[str, Any]]:
    # Keyed by intersections.attribute_key and group_key (docs/shard-format.md): a bare "&" would
    # merge the intersection's groups ("a"&"b&c" and "a&b"&"c").
    group_counts: dict[str, dict[str, int]] = {}
    unknown_counts: dict[str, int] = {}
    for attribute, attr_codes in zip(attributes, codes, strict=True):
        size = len(attribute.groups)
        counts = np.bincount(attr_codes, minlength=size + 1)
        key = attribute_key([attribute.name])
        group_counts[key] = {g: int(c) for g, c in zip(attribute.groups, counts[:size], strict=True)}
        unknown_counts[key] = int(counts[size])
    if len(attributes) >= 2:
        a, b = attributes[0], attributes[1]
        known = (codes[0] < len(a.groups)) & (codes[1] < len(b.groups))
        joint = codes[0][known] * len(b.groups) + codes[1][known]
        counts = np.bincount(joint, minlength=len(a.groups) * len(b.groups))
        key = attribute_key([a.name, b.name])
        group_counts[key] = {
            group_key([ga, gb]): int(counts[i * len(b.groups) + j])
            for i, ga in enumerate(a.groups)
            for j, gb in enumerate(b.groups)
        }
        unknown_counts[key] = int((~known).sum())
    return {"group_counts": group_counts, "unknown_counts": unknown_counts}


def _to_json(obj: object) -> str:
    try:
        return json.dumps(obj, indent=2, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise ShardingError(f"the shard metadata is not valid JSON: {exc}") from exc


def _write_json(path: Path, obj: object) -> None:
    path.write_text(_to_json(obj))
    _fsync_file(path)


def _fsync_file(path: Path) -> None:
    # Without fsync a crash soon after the rename could expose renamed-but-empty files.
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _move_into_place(tmp_dir: Path, out_dir: Path) -> None:
    if out_dir.exists() and any(out_dir.iterdir()):
        # overwrite=True: move the old shards aside first; rename cannot replace a non-empty dir.
        old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
        os.replace(out_dir, old)
        os.replace(tmp_dir, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        # rename(2) replaces an empty directory atomically.
        os.replace(tmp_dir, out_dir)
    _fsync_dir(out_dir.parent)
