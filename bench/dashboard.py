"""The experiment page's data endpoint on a large search, against the naive full payload.

    .venv/bin/python bench/dashboard.py [--trials 20] [--steps 2000] [--repeat 7]
        [--database-url postgres://postgres@127.0.0.1:5432/bench_dashboard]

An experiment of ``--trials`` trials, each with ``--steps`` validations of 40 series (eod,
accuracy, fair_objective, val_loss, auc, val_examples, eod per attribute, recall and FPR per group,
the confusion counts per group and the unknown counts: 1.6 million metric points by default), is
written into PostgreSQL with COPY, as the ingestion writes them, and then judged the way ingestion
judges a running trial: ``trial_verdicts_update`` on every 200th validation, in order (real
verdicts, verdict documents and the ``trial_verdict.changed`` events the timeline marks). The table
is then vacuumed and analysed, as autovacuum would after such a load.

Measured, in one process, through Django's test client as a logged-in reviewer (the whole request:
middleware, selectors, queries, figures, JSON), after one untimed request:

1. ``GET /experiments/<id>/figures.json``, the endpoint the page draws from: server time (median of
   ``--repeat``) and response size. Targets: <= 300 ms and <= 1 MB.
2. The naive payload: every point of every series of every trial as JSON (``{trial: {name:
   [[step, value], ...]}}``), built and serialised the same way, once.

The database is created (and migrated) if missing; the experiment is deleted at the end (``--keep``
leaves it for a later ``--reuse`` run, which skips the minute of loading).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchkit import bench_dataset_version, ensure_database

REPO = Path(__file__).resolve().parents[1]
EXPERIMENT_NAME = "bench-dashboard"
TARGET_SECONDS = 0.300
TARGET_BYTES = 1_000_000
JUDGE_EVERY = 200  # validations between two judged ones
PERIOD = 25  # batches between validations
POSITIVES = 2_000  # per group
NEGATIVES = 3_000
GROUPS = {"gender": ("female", "male"), "age_group": ("young", "middle", "old")}
SCALARS = ("eod", "accuracy", "fair_objective", "val_loss", "auc", "val_examples")


def series_names() -> list[tuple[str, str, str]]:
    """(name, attribute, group) of the 40 validation series, as the trainer names them."""
    names = [(name, "", "") for name in SCALARS]
    for attribute, groups in GROUPS.items():
        names.append((f"eod/{attribute}", "", ""))
        names.append((f"count/{attribute}/unknown", attribute, "unknown"))
        for group in groups:
            names.append((f"recall/{attribute}/{group}", attribute, group))
            names.append((f"fpr/{attribute}/{group}", attribute, group))
            names.extend((f"count/{attribute}/{group}/{cell}", attribute, group) for cell in ("tp", "fn", "fp", "tn"))
    return names


def trial_values(steps: int, seed: int) -> dict[str, np.ndarray]:
    """Every series of one trial: per-group recall as random walks that converge, the counts that
    give them, and eod as the trainer computes it from them."""
    rng = np.random.default_rng(seed)
    values: dict[str, np.ndarray] = {}
    gaps = []
    for attribute, groups in GROUPS.items():
        recalls = []
        for group in groups:
            walk = np.cumsum(rng.normal(0, 0.004, steps))
            recall = np.clip(0.75 + rng.normal(0, 0.08) * np.exp(-np.arange(steps) / 600) + walk, 0.05, 0.99)
            tp = np.round(recall * POSITIVES)
            fpr = np.clip(0.2 + np.cumsum(rng.normal(0, 0.002, steps)), 0.01, 0.9)
            fp = np.round(fpr * NEGATIVES)
            values[f"recall/{attribute}/{group}"] = tp / POSITIVES
            values[f"fpr/{attribute}/{group}"] = fp / NEGATIVES
            values[f"count/{attribute}/{group}/tp"] = tp
            values[f"count/{attribute}/{group}/fn"] = POSITIVES - tp
            values[f"count/{attribute}/{group}/fp"] = fp
            values[f"count/{attribute}/{group}/tn"] = NEGATIVES - fp
            recalls.append(tp / POSITIVES)
        values[f"count/{attribute}/unknown"] = np.full(steps, 17.0)
        gap = np.max(recalls, axis=0) - np.min(recalls, axis=0)
        values[f"eod/{attribute}"] = gap
        gaps.append(gap)
    values["eod"] = np.max(gaps, axis=0)
    values["val_loss"] = 0.45 + 0.2 * np.exp(-np.arange(steps) / 400) + rng.normal(0, 0.005, steps)
    values["fair_objective"] = values["val_loss"] + values["eod"]
    values["accuracy"] = np.clip(0.8 - 0.1 * np.exp(-np.arange(steps) / 300) + rng.normal(0, 0.004, steps), 0, 1)
    values["auc"] = np.clip(values["accuracy"] + 0.05, 0, 1)
    values["val_examples"] = np.full(steps, float(len(GROUPS["gender"]) * (POSITIVES + NEGATIVES)))
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--steps", type=int, default=2000, help="validations per trial")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the experiment for a later --reuse")
    parser.add_argument("--reuse", action="store_true", help="measure the experiment a --keep run left")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_dashboard"),
    )
    args = parser.parse_args()

    ensure_database(args.database_url)
    os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditportal.settings.test")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment
    from django.urls import reverse

    from auditportal.accounts.models import Role, RoleGrant, User
    from auditportal.experiments.models import Experiment, MetricPoint

    call_command("migrate", verbosity=0)
    setup_test_environment()  # the test client's host, "testserver", becomes an allowed one
    names = series_names()
    started = time.perf_counter()
    earlier = Experiment.objects.filter(name=EXPERIMENT_NAME)
    experiment = earlier.first() if args.reuse else None
    if experiment is None:
        earlier.delete()
        experiment = _load(args.trials, args.steps, names)
    points = MetricPoint.objects.filter(trial__experiment=experiment).count()
    load_seconds = time.perf_counter() - started
    assert points == args.trials * args.steps * len(names), points
    load = os.getloadavg()[0]
    version = getattr(connection, "pg_version", 0) // 10000
    print(
        f"load average {load:.1f} on {os.cpu_count()} CPUs; database: PostgreSQL {version}; {args.trials} trials x "
        f"{args.steps:,} validations x {len(names)} series = {points:,} metric points (written and judged "
        f"in {load_seconds:.0f} s)"
    )

    try:
        reviewer, _ = User.objects.get_or_create(username="bench-reviewer")
        RoleGrant.objects.get_or_create(user=reviewer, role=Role.REVIEWER)
        client = Client()
        client.force_login(reviewer)
        url = reverse("experiments:figures", args=[experiment.pk])

        first = _timed(lambda: client.get(url))
        timings, cpu = [], []
        for _ in range(args.repeat):
            cpu_started = time.process_time()
            seconds, response = _timed(lambda: client.get(url))
            cpu.append(time.process_time() - cpu_started)
            assert response.status_code == 200
            timings.append(seconds)
        with CaptureQueriesContext(connection) as queries:
            _, response = _timed(lambda: client.get(url))
        body = response.content
        data = json.loads(body)
        timeline = data["figures"]["timeline"]["data"]
        lines = [trace for trace in timeline if "meta" in trace]
        counts = [_length(trace["x"]) for trace in lines]
        per_trace = max(counts)
        assert len(lines) == args.trials
        assert per_trace <= 2000

        naive_seconds, naive_bytes = _naive(experiment)

        endpoint = statistics.median(timings)
        size = len(body)
        print(
            f"figures.json  : {endpoint * 1000:6.0f} ms server time (median of {args.repeat}, of which "
            f"{statistics.median(cpu) * 1000:.0f} ms CPU in Django; first request {first[0] * 1000:.0f} ms), "
            f"{size / 1e6:.2f} MB, {len(queries)} queries; timeline: {len(lines)} "
            f"traces, at most {per_trace:,} points each, {sum(counts):,} in all"
        )
        print(
            f"naive payload : {naive_seconds * 1000:6.0f} ms, {naive_bytes / 1e6:.2f} MB "
            f"(every point of every series of every trial)"
        )
        print(
            f"ratio         : {naive_seconds / endpoint:.0f}x faster, {naive_bytes / size:.0f}x smaller; "
            f"targets <= {TARGET_SECONDS * 1000:.0f} ms and <= {TARGET_BYTES / 1e6:.0f} MB"
        )
        ok = endpoint <= TARGET_SECONDS and size <= TARGET_BYTES
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        if not args.keep:
            Experiment.objects.filter(pk=experiment.pk).delete()


def _length(values: Any) -> int:
    """How many values a trace's ``x`` holds: a list, or a typed array (base64) as plotly writes numpy arrays."""
    if isinstance(values, dict):
        return len(base64.b64decode(values["bdata"])) // np.dtype(values["dtype"]).itemsize
    return len(values)


def _timed(call: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def _load(trials: int, steps: int, names: list[tuple[str, str, str]]) -> Any:
    """The experiment, its trials' points (COPY) and their verdicts (judged as ingestion judges)."""
    from django.db import connection, transaction

    from auditportal.experiments.models import Experiment, Trial, TrialState
    from auditportal.experiments.verdicts import trial_verdicts_update

    version = bench_dataset_version()
    experiment = Experiment.objects.create(
        dataset_version=version,
        name=EXPERIMENT_NAME,
        template="asha",
        config_yaml="",
        max_trials=trials,
        batches=steps * PERIOD,
        validation_period=PERIOD,
        backend="local",
        launched_by=version.created_by,
        status="completed",
    )
    step_numbers = np.arange(1, steps + 1) * PERIOD
    for number in range(1, trials + 1):
        values = trial_values(steps, seed=number)
        last = steps - 1
        trial = Trial.objects.create(
            experiment=experiment,
            number=number,
            state=TrialState.COMPLETED,
            steps_done=int(step_numbers[-1]),
            steps_planned=int(step_numbers[-1]),
            hparams={"learning_rate": float(10 ** np.random.default_rng(number).uniform(-4, -2)), "seed": number},
            latest_step=int(step_numbers[-1]),
            latest_eod=float(values["eod"][last]),
            latest_fair_objective=float(values["fair_objective"][last]),
            latest_accuracy=float(values["accuracy"][last]),
        )
        with connection.cursor() as cursor:
            raw = cursor.cursor
            sql = 'COPY experiments_metricpoint (trial_id, kind, step, name, value, attribute, "group") FROM STDIN'
            with raw.copy(sql) as copy:
                columns = [(name, attribute, group, values[name].tolist()) for name, attribute, group in names]
                for index, step in enumerate(step_numbers.tolist()):
                    copy.write(
                        "".join(
                            f"{trial.pk}\tvalidation\t{step}\t{name}\t{series[index]!r}\t{attribute}\t{group}\n"
                            for name, attribute, group, series in columns
                        )
                    )
        for index in range(JUDGE_EVERY - 1, steps, JUDGE_EVERY):
            metrics = {name: float(values[name][index]) for name, _, _ in names if name.startswith("count/")}
            with transaction.atomic():
                trial_verdicts_update(trial=trial, step=int(step_numbers[index]), metrics=metrics)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE experiments_metricpoint")
    return experiment


def _naive(experiment: Any) -> tuple[float, int]:
    """Every point of every series, grouped per trial and name, as one JSON response."""
    from django.http import JsonResponse

    from auditportal.experiments.models import MetricPoint

    started = time.perf_counter()
    payload: dict[str, dict[str, list[tuple[int, float | None]]]] = {}
    rows = (
        MetricPoint.objects.filter(trial__experiment=experiment)
        .order_by("trial_id", "name", "step")
        .values_list("trial_id", "name", "step", "value")
    )
    for trial_id, name, step, value in rows.iterator(chunk_size=20_000):
        payload.setdefault(str(trial_id), {}).setdefault(name, []).append((step, value))
    body = JsonResponse(payload).content
    return time.perf_counter() - started, len(body)


if __name__ == "__main__":
    sys.exit(main())
