"""The portal's whole attribution task on 10,000 rows x 20 features, against a whole ``trainer.predict`` process.

    .venv/bin/python bench/attribution_task.py [--rows 10000] [--numeric 16] [--categorical 4] [--repeats 3] [--keep]

Trains a checkpoint with the trainer (bench/attributions.py's ``_train``: tests/trainer/trainer_testkit.py
``make_proxy_frame``, one feature gender's proxy, enough rows for ``--rows`` validation rows; Determined's
local mode), then, in a fresh child with Django set up on a migrated SQLite database in a temporary
PORTAL_VAR_DIR, registers a completed local trial on that checkpoint and times, per repeat (a new seed
each: the same inputs would answer the stored one), the WHOLE task as the portal runs it:
``attributions.services.attribution_request`` (the checks, the weights' SHA-256, the pending row, its
event and its outbox row) and the worker's task body (``attributions.tasks.attribution_compute_task``:
the checks again, ``python -m trainer.attribute --sample-size ROWS`` in a subprocess, ``summarise``,
the canonical JSON stored with its event). Target (issue 31): at most 30 s on this machine's 2 cores.

The baseline, measured in the same run and alternating with it: a whole ``python -m trainer.predict``
process on the same checkpoint and shards (start-up, the shards, every validation row's prediction, the
npz): what running a checkpoint at all costs. Printed: each side's median and the ratio of the medians.
On a shared machine wall times stretch with the load (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from attributions import HP, _train
from benchkit import in_child

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 30.0


def _predict_seconds(shards: Path, checkpoint: Path, out: Path) -> float:
    command = [sys.executable, "-m", "trainer.predict", "--data", str(shards), "--checkpoint", str(checkpoint)]
    command += ["--hparams", json.dumps(HP), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, cwd=REPO)
    return time.perf_counter() - started


def _child(work: str, shards: str, checkpoint: str, rows: int, repeats: int, queue: Any) -> None:
    var_dir = Path(work) / "var"
    var_dir.mkdir()
    os.environ["PORTAL_VAR_DIR"] = str(var_dir)
    os.environ["DATABASE_URL"] = f"sqlite:///{var_dir / 'bench.sqlite3'}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "auditportal.settings.test"
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from benchkit import bench_dataset_version

    from auditportal.accounts.cli import cli_user
    from auditportal.accounts.models import Role
    from auditportal.attributions import services, tasks
    from auditportal.attributions.models import TrialAttribution
    from auditportal.experiments.models import Backend, Experiment, Trial, TrialState

    settings.EXPERIMENT_RUN_DIR = Path(work)
    user = cli_user(None, role=Role.ML_ENGINEER)
    version = bench_dataset_version()  # its SHA-256 is the one trainer_testkit's manifest names
    experiment = Experiment.objects.create(
        dataset_version=version,
        name="bench",
        template="single",
        config_yaml="name: bench\n",
        batches=200,
        validation_period=200,
        backend=Backend.LOCAL,
        shard_dir=shards,
        launched_by=user,
    )
    trial = Trial.objects.create(
        experiment=experiment, number=1, hparams=HP, state=TrialState.COMPLETED, checkpoint=checkpoint
    )
    results = []
    for seed in range(1, repeats + 1):
        started = time.perf_counter()
        pending, created = services.attribution_request(
            user=user, trial=trial, sample_size=rows, seed=seed, queue=False
        )
        assert created
        tasks.attribution_compute_task(pending.pk)  # the worker's task body, in this process
        seconds = time.perf_counter() - started
        done = TrialAttribution.objects.get(pk=pending.pk)
        if done.state != "done":
            raise SystemExit(f"the attribution failed: {done.error}")
        document = done.document or {}
        results.append(
            {
                "seconds": seconds,
                "rows": document["sample"]["size"],
                "features": len(document["features"]),
                "holds": document["completeness"]["holds"],
                "bytes": len(done.canonical),
            }
        )
        print(f"  whole task, seed {seed}: {seconds:.1f} s", flush=True)
    queue.put(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000, help="validation rows sampled and explained")
    parser.add_argument("--numeric", type=int, default=16)
    parser.add_argument("--categorical", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the generated shards, checkpoint and database")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-attribution-task-"))
    started = time.perf_counter()
    shards, checkpoint = _train(work, args.rows, args.numeric, args.categorical)
    print(f"trained a checkpoint in {time.perf_counter() - started:.1f} s ({args.numeric + args.categorical} features)")

    # The baseline before and after the portal's task, so that both see the machine's load alike.
    predict = [_predict_seconds(shards, checkpoint, work / "predictions.npz")]
    print(f"  python -m trainer.predict: {predict[-1]:.1f} s", flush=True)
    task = in_child("the attribution task", _child, str(work), str(shards), str(checkpoint), args.rows, args.repeats)
    for _ in range(max(1, args.repeats - 1)):
        predict.append(_predict_seconds(shards, checkpoint, work / "predictions.npz"))
        print(f"  python -m trainer.predict: {predict[-1]:.1f} s", flush=True)

    seconds = [item["seconds"] for item in task]
    first = task[0]
    print(
        f"whole attribution task ({first['rows']:,} rows x {first['features']} features, completeness "
        f"{'holds' if all(item['holds'] for item in task) else 'DOES NOT HOLD'}, document {first['bytes']:,} bytes): "
        f"median {statistics.median(seconds):.1f} s, fastest {min(seconds):.1f} s over {len(seconds)} "
        f"(target {TARGET_S:.0f} s: {'met' if statistics.median(seconds) <= TARGET_S else 'MISSED'})"
    )
    print(f"baseline, a whole python -m trainer.predict: median {statistics.median(predict):.1f} s over {len(predict)}")
    print(f"ratio (task / predict, medians): {statistics.median(seconds) / statistics.median(predict):.1f}x")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
