"""The trainer's shared runs: trained once per session (a run takes from seconds to a minute), on
shards written once. The tests that read a run carry ``xdist_group("trained-checkpoint")`` so that
under ``make test`` one xdist worker trains them, once, rather than each worker; like every test that
runs the trainer, they are marked slow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from determined import constants as det_constants

from tests.trainer.trainer_testkit import (
    make_demo_frame,
    ports_taken,
    run_trainer,
    skewed_assignment,
    write_shard_dir,
)

# Same model maths in both runs: no dropout, no batch norm (its sums make training drift apart in
# the last digits; sync_batch is checked against BatchNorm1d in test_model.py). The 2-process run
# trains on the same global batches: per-worker batches of 32 are cut from the same global order.
EQUAL_HP: dict[str, Any] = {
    "global_batch_size": 64,
    "dropout": 0.0,
    "normalization": "none",
    "val_batch_size": 100,
    "seed": 3,
}
BATCHES, PERIOD = 40, 20
# The chief's ZMQ broadcast ports (determined/constants.py), bound by every multi-process run.
DETERMINED_FIXED_PORTS = (det_constants.INTER_TRAIN_PROCESS_COMM_PORT_1, det_constants.INTER_TRAIN_PROCESS_COMM_PORT_2)


@pytest.fixture(scope="session")
def skewed_shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    frame = make_demo_frame(4000, seed=0)
    return write_shard_dir(frame, tmp_path_factory.mktemp("skewed") / "shards", skewed_assignment(frame))


@pytest.fixture(scope="session")
def one_process(skewed_shards: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    workdir = tmp_path_factory.mktemp("one")
    return workdir, run_trainer(workdir, skewed_shards, EQUAL_HP, batches=BATCHES, validation_period=PERIOD)


@pytest.fixture(scope="session")
def two_process(skewed_shards: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    workdir = tmp_path_factory.mktemp("two")
    # As if another two-worker run held Determined's fixed ports: this one must not need them.
    with ports_taken(DETERMINED_FIXED_PORTS):
        return workdir, run_trainer(
            workdir,
            skewed_shards,
            EQUAL_HP,
            batches=BATCHES,
            validation_period=PERIOD,
            nproc=2,
            timeout=240,
        )


@pytest.fixture(scope="session")
def two_process_plain(skewed_shards: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    hp = {**EQUAL_HP, "sampler": "plain"}
    return run_trainer(
        tmp_path_factory.mktemp("plain"),
        skewed_shards,
        hp,
        batches=BATCHES,
        validation_period=PERIOD,
        nproc=2,
        timeout=240,
    )
