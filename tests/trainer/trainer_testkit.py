"""Test helpers: synthetic tabular data, a shard-directory writer, and a trainer runner.

The writer follows docs/shard-format.md (schema 1) exactly but is independent of the portal's
writer, so the trainer's reader is tested against the documented contract.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from auditportal.experiments.backends import runner

REPO = Path(__file__).resolve().parents[2]
UNKNOWN_TOKENS = ["", "nan", "-1", "unknown"]


def make_demo_frame(n: int = 4000, seed: int = 0, *, gap: float = 1.4) -> pd.DataFrame:
    """Credit-like rows where the informative feature separates female positives less well.

    ``signal`` is shifted by +2.0 for male positives but only by ``2.0 - gap`` for female ones, so
    a plain model has lower recall for women; ``proxy`` correlates with gender, which lets a
    fairness-regularised model compensate.
    """
    rng = np.random.default_rng(seed)
    gender = rng.choice(["female", "male"], size=n, p=[0.45, 0.55]).astype(object)
    age = rng.choice(["18-29", "30-44", "45+"], size=n, p=[0.3, 0.4, 0.3]).astype(object)
    y = (rng.random(n) < 0.4).astype(np.int8)
    female = gender == "female"
    shift = np.where(female, 2.0 - gap, 2.0)
    signal = rng.normal(0.0, 1.0, n) + y * shift
    proxy = np.where(female, 1.0, -1.0) + rng.normal(0.0, 0.7, n)
    income = rng.normal(40000.0, 12000.0, n) + y * 3000.0
    region = rng.choice(["north", "south", "west"], size=n).astype(object)
    region[rng.random(n) < 0.05] = None
    gender[rng.random(n) < 0.03] = None  # unknown
    frame = pd.DataFrame(
        {
            "signal": signal,
            "proxy": proxy,
            "income": income,
            "region": region,
            "_target": y,
            "_attr.gender": gender,
            "_attr.age_group": age,
        }
    )
    frame.loc[rng.random(n) < 0.02, "income"] = np.nan
    return frame


DEMO_NUMERIC = ("signal", "proxy", "income")
DEMO_CATEGORICAL = ("region",)
DEMO_ATTRIBUTES = (("gender", ("female", "male")), ("age_group", ("18-29", "30-44", "45+")))


def make_proxy_frame(
    n: int, seed: int = 0, *, numeric: int = 4, categorical: int = 2, proxy: bool = True
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """Rows for the attributions tests and benchmark: (frame, numeric names, categorical names).

    With ``proxy`` the first numeric feature, ``zip_density``, is gender's proxy (women +1, men -1,
    noise 0.7) and raises the label's log-odds by 1.2 per unit: the score gap between the genders
    comes through it alone. Without, every feature and the label are independent of both attributes.
    The label also depends on ``x1``, ``x2`` and the first categorical, none tied to a group.
    """
    rng = np.random.default_rng([seed, 303])
    gender = rng.choice(["female", "male"], size=n, p=[0.45, 0.55]).astype(object)
    age = rng.choice(["18-29", "30-44", "45+"], size=n, p=[0.3, 0.5, 0.2]).astype(object)
    female = gender == "female"
    num_names = ["zip_density", *(f"x{j}" for j in range(1, numeric))]
    cat_names = [f"c{j}" for j in range(categorical)]
    columns: dict[str, Any] = {}
    for j, name in enumerate(num_names):
        columns[name] = rng.normal(0.0, 1.0, n) * (3.0 if j == 3 else 1.0) + (5.0 if j == 3 else 0.0)
    if proxy:
        columns["zip_density"] = np.where(female, 1.0, -1.0) + rng.normal(0.0, 0.7, n)
    for j, name in enumerate(cat_names):
        columns[name] = rng.choice([f"k{v}" for v in range(3 + j % 4)], size=n).astype(object)
    logit = -0.5 + 1.0 * columns.get("x1", 0.0) + 0.8 * columns.get("x2", 0.0)
    if cat_names:
        logit = logit + np.where(columns[cat_names[0]] == "k0", 0.8, 0.0)
    if proxy:
        logit = logit + 1.2 * columns["zip_density"]
    columns["_target"] = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int8)
    columns["_attr.gender"] = gender
    columns["_attr.age_group"] = age
    return pd.DataFrame(columns), num_names, cat_names


def _feature_block(frame: pd.DataFrame, numeric: Sequence[str], categorical: Sequence[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in numeric:
        col = frame[name].astype(float)
        std = float(col.std(ddof=0))
        out.append({"name": name, "kind": "numeric", "mean": float(col.mean()), "std": std if std > 0 else 1.0})
    for name in categorical:
        cats = sorted({str(v) for v in frame[name].dropna()})
        out.append({"name": name, "kind": "categorical", "categories": cats})
    return out


def _group_counts(
    part: pd.DataFrame, attributes: Sequence[tuple[str, Sequence[str]]]
) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    unknown: dict[str, int] = {}
    for name, groups in attributes:
        col = part[f"_attr.{name}"]
        counts[name] = {g: int((col == g).sum()) for g in groups}
        unknown[name] = int(col.isna().sum())
    if len(attributes) >= 2:
        (a, ga), (b, gb) = attributes[0], attributes[1]
        ca, cb = part[f"_attr.{a}"], part[f"_attr.{b}"]
        key = f"{a}&{b}"
        counts[key] = {f"{x}&{z}": int(((ca == x) & (cb == z)).sum()) for x in ga for z in gb}
        unknown[key] = int((ca.isna() | cb.isna()).sum())
    return counts, unknown


def write_shard_dir(
    frame: pd.DataFrame,
    out: Path,
    assignment: np.ndarray,
    *,
    numeric: Sequence[str] = DEMO_NUMERIC,
    categorical: Sequence[str] = DEMO_CATEGORICAL,
    attributes: Sequence[tuple[str, Sequence[str]]] = DEMO_ATTRIBUTES,
) -> Path:
    """Write ``frame`` as a schema-1 shard directory; ``assignment[i]`` is row i's part."""
    parts = int(assignment.max()) + 1
    features = _feature_block(frame, numeric, categorical)
    label = {"column": "label", "positive": "1", "target_column": "_target"}
    attr_block = [
        {"name": n, "column": f"_attr.{n}", "groups": list(g), "unknown_tokens": UNKNOWN_TOKENS} for n, g in attributes
    ]
    dataset = {"version_id": 1, "name": "synthetic", "sha256": "0" * 64}
    columns = [*numeric, *categorical, "_target", *(f"_attr.{n}" for n, _ in attributes)]
    out.mkdir(parents=True, exist_ok=True)
    part_dirs = []
    for k in range(parts):
        part = frame.loc[assignment == k, columns].reset_index(drop=True)
        name = f"part-{k:05d}"
        part_dirs.append(name)
        (out / name).mkdir(exist_ok=True)
        schema = pa.schema(
            [(c, pa.float64()) for c in numeric]
            + [(c, pa.string()) for c in categorical]
            + [("_target", pa.int8())]
            + [(f"_attr.{n}", pa.string()) for n, _ in attributes]
        )
        table = pa.Table.from_pandas(part, schema=schema, preserve_index=False)
        pq.write_table(table, out / name / "data.parquet")
        counts, unknown = _group_counts(part, attributes)
        meta = {
            "schema": 1,
            "part": k,
            "parts": parts,
            "num_examples": len(part),
            "positives": int(part["_target"].sum()),
            "label": label,
            "features": features,
            "attributes": attr_block,
            "group_counts": counts,
            "unknown_counts": unknown,
            "dataset": dataset,
        }
        (out / name / "metadata.json").write_text(json.dumps(meta, indent=2))
    manifest = {
        "schema": 1,
        "parts": parts,
        "num_examples": len(frame),
        "part_dirs": part_dirs,
        "label": label,
        "features": features,
        "attributes": attr_block,
        "dataset": dataset,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return out


def stratified_assignment(frame: pd.DataFrame, parts: int, seed: int = 0) -> np.ndarray:
    """Deal each (gender, age, target) stratum round-robin over the parts, as the portal does."""
    rng = np.random.default_rng([seed, 101])  # a stream independent of make_demo_frame's
    key = (
        frame["_attr.gender"].fillna("?")
        + "|"
        + frame["_attr.age_group"].fillna("?")
        + "|"
        + frame["_target"].astype(str)
    )
    out = np.zeros(len(frame), dtype=np.int64)
    for _, idx in frame.groupby(key).indices.items():
        idx = rng.permutation(idx)
        out[idx] = np.arange(len(idx)) % parts
    return out


def skewed_assignment(frame: pd.DataFrame, *, female_share_in_part0: float = 0.85, seed: int = 0) -> np.ndarray:
    """Two parts of about equal size where part 0 holds most women and part 1 most men."""
    rng = np.random.default_rng([seed, 202])  # a stream independent of make_demo_frame's
    female = (frame["_attr.gender"] == "female").to_numpy()
    u = rng.random(len(frame))
    p0 = np.where(female, female_share_in_part0, 1.0 - female_share_in_part0)
    p0 = np.where(frame["_attr.gender"].isna().to_numpy(), 0.5, p0)
    return np.where(u < p0, 0, 1).astype(np.int64)


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free a moment ago, as the local backend's runner chooses them
    for a trial (below the ephemeral range, so no outgoing connection takes one meanwhile)."""
    return runner.free_ports(count)


@contextlib.contextmanager
def ports_taken(ports: Sequence[int]) -> Iterator[None]:
    """Listen on ``ports`` (all interfaces, as Determined's chief binds) for the duration; a port
    someone else already holds is taken anyway."""
    held = []
    try:
        for port in ports:
            s = socket.socket()
            # Like ZMQ's own sockets: a closed connection in TIME_WAIT must not make this one fail.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("0.0.0.0", port))  # noqa: S104 - the wildcard address is the one to block
                s.listen()
            except OSError as exc:
                s.close()
                if exc.errno != errno.EADDRINUSE:
                    raise
                continue
            held.append(s)
        yield
    finally:
        for s in held:
            s.close()


def distributed_port_env() -> dict[str, str]:
    """Free ports for the fixed ones a multi-process local run would otherwise bind.

    Determined's DistributedContext (core/_distributed.py) has the chief bind a ZMQ broadcast server
    on INTER_TRAIN_PROCESS_COMM_PORT_1 and _2 (constants.py: 12360 and 12376 unless set in the
    environment), so two runs at once on one machine - another test session, another engineer's -
    fail with "Address already in use". torch.distributed.run's rendezvous port is --master_port.
    """
    pub, pull = free_ports(2)
    return {"INTER_TRAIN_PROCESS_COMM_PORT_1": str(pub), "INTER_TRAIN_PROCESS_COMM_PORT_2": str(pull)}


def run_trainer(
    workdir: Path,
    data: Path,
    hparams: dict[str, Any],
    *,
    batches: int,
    validation_period: int | None = None,
    nproc: int = 1,
    timeout: float = 120.0,
    extra: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Run ``python -m trainer.train`` (or torchrun); return the metrics lines.

    The process runs in the empty ``workdir/cwd`` because Determined copies the working directory
    into every checkpoint; checkpoints go to ``workdir/xdg`` (outside it).
    """
    cwd = workdir / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    metrics = workdir / "metrics.jsonl"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env["XDG_DATA_HOME"] = str(workdir / "xdg")
    env["OMP_NUM_THREADS"] = "1"
    args = [
        "--data",
        str(data),
        "--hparams",
        json.dumps(hparams),
        "--batches",
        str(batches),
        "--metrics-out",
        str(metrics),
        *extra,
    ]
    if validation_period:
        args += ["--validation-period", str(validation_period)]
    if nproc == 1:
        cmd = [sys.executable, "-m", "trainer.train", *args]
    else:
        env.update(distributed_port_env())
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={nproc}",
            "--master_addr=127.0.0.1",
            f"--master_port={free_port()}",
            "-m",
            "trainer.train",
            *args,
        ]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"trainer failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return [json.loads(line) for line in metrics.read_text().splitlines()]


# The hyperparameters of the attributions tests' trainings (tests/trainer/test_attribute.py,
# tests/attributions/test_real.py): a small model, no dropout, one validation at the end.
PROXY_HP: dict[str, Any] = {"global_batch_size": 64, "dropout": 0.0, "val_batch_size": 200, "seed": 3}


def train_on_proxy_frame(root: Path, *, proxy: bool) -> tuple[Path, Path]:
    """Shards of ``make_proxy_frame(4000, seed=0, proxy=proxy)`` under ``root`` and a 60-batch local
    training on them with PROXY_HP: (the shard directory, the checkpoint folder)."""
    frame, numeric, categorical = make_proxy_frame(4000, seed=0, proxy=proxy)
    shards = write_shard_dir(
        frame, root / "shards", stratified_assignment(frame, 2), numeric=numeric, categorical=categorical
    )
    run_trainer(root / "run", shards, PROXY_HP, batches=60, validation_period=60)
    (checkpoint,) = (root / "run" / "xdg" / "determined").iterdir()
    return shards, checkpoint


# Two trainings on the demo shards that differ only in the fairness penalty's weight: the fairness
# test's (tests/trainer/test_training.py: the penalty lowers eod) and the paired trials' champion and
# challenger (tests/comparisons/test_trials.py), trained once per session (tests/conftest.py).
LAMBDA_BASE_HP: dict[str, Any] = {"global_batch_size": 128, "learning_rate": 0.01, "seed": 0}
LAMBDA_HP: dict[str, dict[str, Any]] = {
    "plain": {**LAMBDA_BASE_HP, "fairness_lambda": 0.0},
    "fair": {**LAMBDA_BASE_HP, "fairness_lambda": 5.0},
}
LAMBDA_BATCHES = 150


@dataclass(frozen=True)
class TrainedRun:
    """A finished local training: its hyperparameters, metrics lines and (one) checkpoint folder."""

    hparams: dict[str, Any]
    lines: list[dict[str, Any]]
    checkpoint: Path


def train_lambda_runs(root: Path, shards: Path) -> dict[str, TrainedRun]:
    """LAMBDA_HP's two trainings on ``shards``, each in its run folder under ``root``."""
    runs = {}
    for name, hparams in LAMBDA_HP.items():
        lines = run_trainer(root / name, shards, hparams, batches=LAMBDA_BATCHES)
        (checkpoint,) = (root / name / "xdg" / "determined").iterdir()
        runs[name] = TrainedRun(hparams=hparams, lines=lines, checkpoint=checkpoint)
    return runs
