"""Ingest 1 million metric points into PostgreSQL: the portal's ingestion path vs a naive ORM loop.

    .venv/bin/python bench/ingest.py [--points 1000000] [--naive-sample 5000]
        [--database-url postgres://postgres@127.0.0.1:5432/bench_ingest]

The fast path is ``trial_metrics_ingest`` (bulk upsert on (trial, kind, step, name), batches of
EXPERIMENT_INGEST_BATCH_SIZE, one transaction per batch). The naive loop saves one row per
``update_or_create`` call (what an idempotent per-row ingest would do); it runs on a sample and is
extrapolated. Both run in the same process against the same database, which is created (and
migrated) if missing and emptied of metric points before each measurement.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchkit import bench_dataset_version, ensure_database

REPO = Path(__file__).resolve().parents[1]
TARGET_SPEEDUP = 20.0
TARGET_RATE = 50_000.0
NAMES_PER_REPORT = 500


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--naive-sample", type=int, default=5_000)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_ingest"),
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

    call_command("migrate", verbosity=0)

    from auditportal.experiments.ingest import trial_metrics_ingest
    from auditportal.experiments.models import MetricPoint, Trial
    from auditportal.fairness.files.metricsfile import MetricRecord

    trial = _make_trial()
    names = [f"count/attr{i % 5}/group{i // 5}/tp" for i in range(NAMES_PER_REPORT - 3)] + [
        "eod",
        "fair_objective",
        "accuracy",
    ]
    reports_needed = -(-args.points // NAMES_PER_REPORT)

    def reports() -> list[MetricRecord]:
        return [
            MetricRecord(
                kind="validation" if step % 2 else "training",
                step=step,
                metrics={name: float(step) + index / 1000 for index, name in enumerate(names)},
                end=step,
            )
            for step in range(1, reports_needed + 1)
        ]

    def reset() -> None:
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE experiments_metricpoint")
        Trial.objects.filter(pk=trial.pk).update(metrics_offset=0, steps_done=0, latest_step=None)
        trial.refresh_from_db()

    # Fast path.
    reset()
    batch = reports()
    started = time.perf_counter()
    result = trial_metrics_ingest(trial=trial, records=batch)
    fast_seconds = time.perf_counter() - started
    stored = MetricPoint.objects.filter(trial=trial).count()
    assert stored == result.points == reports_needed * NAMES_PER_REPORT, (stored, result.points)
    fast_rate = stored / fast_seconds

    # The same reports again: an idempotent re-run (after a crash) adds nothing.
    started = time.perf_counter()
    trial_metrics_ingest(trial=trial, records=batch)
    rerun_seconds = time.perf_counter() - started
    assert MetricPoint.objects.filter(trial=trial).count() == stored

    # Naive loop on a sample.
    reset()
    sample = [
        (report.kind, report.step, name, value)
        for report in batch[: -(-args.naive_sample // NAMES_PER_REPORT)]
        for name, value in report.metrics.items()
    ][: args.naive_sample]
    started = time.perf_counter()
    for kind, step, name, value in sample:
        MetricPoint.objects.update_or_create(trial=trial, kind=kind, step=step, name=name, defaults={"value": value})
    naive_seconds = time.perf_counter() - started
    naive_rate = len(sample) / naive_seconds
    reset()

    speedup = fast_rate / naive_rate
    print(f"database: PostgreSQL {getattr(connection, 'pg_version', 0) // 10000} ({args.database_url})")
    print(f"ingestion path : {stored:,} points in {fast_seconds:.1f} s = {fast_rate:,.0f} points/s")
    print(f"re-run (upsert): {stored:,} points in {rerun_seconds:.1f} s, rows unchanged ({stored:,})")
    print(
        f"naive ORM loop : {len(sample):,} points in {naive_seconds:.1f} s = {naive_rate:,.0f} points/s "
        f"(extrapolated: {stored / naive_rate:,.0f} s for {stored:,})"
    )
    print(f"speed-up       : {speedup:.1f}x (target >= {TARGET_SPEEDUP:.0f}x); rate target >= {TARGET_RATE:,.0f}/s")
    ok = speedup >= TARGET_SPEEDUP and fast_rate >= TARGET_RATE
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def _make_trial() -> Any:
    from auditportal.experiments.models import Experiment, Trial

    version = bench_dataset_version()
    experiment = Experiment.objects.create(
        dataset_version=version,
        name="bench",
        template="single",
        config_yaml="",
        batches=1,
        validation_period=1,
        backend="local",
        launched_by=version.created_by,
    )
    return Trial.objects.create(experiment=experiment, number=1, steps_planned=10**9)


if __name__ == "__main__":
    sys.exit(main())
