"""Bulk, idempotent ingestion of metric records into MetricPoint rows.

A record replaces whatever was stored for its trial, kind and step (a step recorded again after a
resume leaves no stale name behind), and rows are upserted on (trial, kind, step, name), so
re-reading a record after a crash or a second poll of the same snapshot adds nothing and loses
nothing. For the local backend the file offset is advanced in the same transaction as the rows it
covers.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, transaction

from auditportal.experiments.models import MetricKind, MetricPoint, Trial
from auditportal.experiments.verdicts import trial_verdicts_update
from auditportal.fairness.files.metricsfile import MetricRecord, metric_group

if TYPE_CHECKING:
    import psycopg

SUMMARY_METRICS = {
    "eod": "latest_eod",
    "eod_beyond_noise": "latest_eod_beyond_noise",
    "fair_objective": "latest_fair_objective",
    "accuracy": "latest_accuracy",
}


@dataclass
class IngestResult:
    records: int = 0
    points: int = 0
    max_step: int | None = None


Row = tuple[int, str, int, str, float | None, str, str]  # trial_id, kind, step, name, value, attribute, group


def points_upsert(rows: Iterable[Row], *, batch_size: int | None = None) -> None:
    """Insert-or-update metric rows on (trial, kind, step, name); within ``rows`` the last value wins."""
    unique: dict[tuple[int, str, int, str], Row] = {}
    for row in rows:
        unique[row[:4]] = row  # type: ignore[index]
    if not unique:
        return
    if connection.vendor == "postgresql":
        _upsert_postgresql(list(unique.values()))
        return
    MetricPoint.objects.bulk_create(
        (
            MetricPoint(trial_id=t, kind=k, step=s, name=n, value=v, attribute=a, group=g)
            for t, k, s, n, v, a, g in unique.values()
        ),
        batch_size=batch_size or settings.EXPERIMENT_INGEST_BATCH_SIZE,
        update_conflicts=True,
        unique_fields=["trial", "kind", "step", "name"],
        update_fields=["value"],
    )


_COPY_SQL = 'COPY experiments_metricpoint_stage (trial_id, kind, step, name, value, attribute, "group") FROM STDIN'
_MOVE_SQL = (
    'INSERT INTO experiments_metricpoint (trial_id, kind, step, name, value, attribute, "group") '
    'SELECT trial_id, kind, step, name, value, attribute, "group" FROM experiments_metricpoint_stage '
    "ON CONFLICT (trial_id, kind, step, name) DO UPDATE SET value = EXCLUDED.value"
)


_COPY_DIRECT_SQL = 'COPY experiments_metricpoint (trial_id, kind, step, name, value, attribute, "group") FROM STDIN'


def _upsert_postgresql(rows: list[Row]) -> None:
    # Imported here: psycopg takes 0.08 s to import, which a process on SQLite never needs, and this
    # module is loaded by every management command (through the experiments services).
    import psycopg

    # One transaction even when called outside one: the staging table empties at every commit, and
    # SET LOCAL only lasts a transaction.
    with transaction.atomic(), connection.cursor() as cursor:
        # Points are re-read from their source (the offset commits with them), so a commit lost in a
        # server crash costs nothing but a re-read: no need to wait for the WAL flush.
        cursor.execute("SET LOCAL synchronous_commit = off")
        raw = cursor.cursor  # the psycopg cursor under Django's wrapper
        # New points (the normal case) are COPYed straight into the table, the fastest load
        # PostgreSQL offers. Points already stored (a re-read after a crash) make COPY fail on the
        # unique constraint; the savepoint undoes it and the upsert below takes over.
        try:
            with transaction.atomic():
                _copy_rows(raw, _COPY_DIRECT_SQL, rows)
            return
        except psycopg.errors.UniqueViolation:
            pass
        # Upsert: COPY into a session-local staging table, then one INSERT ... ON CONFLICT.
        cursor.execute(
            "CREATE TEMPORARY TABLE IF NOT EXISTS experiments_metricpoint_stage "
            "(trial_id bigint, kind varchar(10), step integer, name varchar(255), value double precision, "
            'attribute varchar(255), "group" varchar(255)) ON COMMIT DELETE ROWS'
        )
        _copy_rows(raw, _COPY_SQL, rows)
        cursor.execute(_MOVE_SQL)
        # Emptied again at commit (ON COMMIT DELETE ROWS); DELETE keeps a second call in the same
        # transaction from moving these rows twice. TRUNCATE would rewrite the table's files.
        cursor.execute("DELETE FROM experiments_metricpoint_stage")


_COPY_CHUNK = 4096


def _copy_rows(raw: psycopg.Cursor[Any], sql: str, rows: list[Row]) -> None:
    # Text written in chunks as it is formatted, so the server parses and inserts one chunk while
    # Python formats the next (psycopg's per-row write_row costs more than the database itself).
    with raw.copy(sql) as copy:
        for start in range(0, len(rows), _COPY_CHUNK):
            copy.write("".join(_copy_line(row) for row in rows[start : start + _COPY_CHUNK]))


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


@functools.lru_cache(maxsize=65536)
def _copy_text(text: str) -> str:
    return text.translate(_COPY_ESCAPES)


def _copy_line(row: Row) -> str:
    trial_id, kind, step, name, value, attribute, group = row
    shown = "\\N" if value is None else repr(value)
    return f"{trial_id}\t{kind}\t{step}\t{_copy_text(name)}\t{shown}\t{_copy_text(attribute)}\t{_copy_text(group)}\n"


def trial_metrics_ingest(
    *, trial: Trial, records: Iterable[MetricRecord], batch_points: int | None = None
) -> IngestResult:
    """Write ``records`` for ``trial`` in transactions of about ``batch_points`` points each.

    Each record stands for its whole (kind, step): the points stored for that step before are
    replaced, and of two records for one step the later wins.
    """
    limit = batch_points or settings.EXPERIMENT_INGEST_BATCH_SIZE
    result = IngestResult()
    pending: dict[tuple[str, int], list[Row]] = {}
    size = 0
    pending_records: list[MetricRecord] = []
    for record in records:
        pending_records.append(record)
        if record.kind in MetricKind.values:
            rows = [
                (trial.pk, record.kind, record.step, name, value, *_group_of(name))
                for name, value in record.metrics.items()
            ]
            size += len(rows) - len(pending.get((record.kind, record.step), ()))
            pending[(record.kind, record.step)] = rows
        if size >= limit:
            _flush(trial, pending, pending_records, result)
            pending, pending_records, size = {}, [], 0
    if pending_records:
        _flush(trial, pending, pending_records, result)
    return result


def trial_metrics_rewind(*, trial: Trial, step: int) -> None:
    """Forget what ``trial`` recorded after ``step`` (it resumed from a checkpoint there and records
    those steps again), and take its summary and verdicts back to its latest remaining validation."""
    with transaction.atomic():
        trial.metric_points.filter(step__gt=step).delete()
        trial.verdicts.filter(step__gt=step).delete()
        latest = (
            trial.metric_points.filter(kind=MetricKind.VALIDATION)
            .order_by("-step")
            .values_list("step", flat=True)
            .first()
        )
        updates: dict[str, object] = {"latest_step": latest, "steps_done": min(trial.steps_done, step)}
        metrics: dict[str, float | None] = {}
        if latest is not None:
            metrics = dict(
                trial.metric_points.filter(kind=MetricKind.VALIDATION, step=latest).values_list("name", "value")
            )
        for metric, column in SUMMARY_METRICS.items():
            updates[column] = metrics.get(metric)
        Trial.objects.filter(pk=trial.pk).update(**updates)  # type: ignore[arg-type]
        for column, value in updates.items():
            setattr(trial, column, value)
        if latest is not None:
            trial_verdicts_update(trial=trial, step=latest, metrics=metrics)


@functools.lru_cache(maxsize=65536)
def _group_of(name: str) -> tuple[str, str]:
    return metric_group(name)


def _flush(
    trial: Trial, by_step: dict[tuple[str, int], list[Row]], records: list[MetricRecord], result: IngestResult
) -> None:
    points = [row for rows in by_step.values() for row in rows]
    updates: dict[str, object] = {}
    ends = [record.end for record in records if record.end is not None]
    if ends:
        updates["metrics_offset"] = max(ends)
    steps = [record.step for record in records if record.kind in MetricKind.values]
    if steps:
        top = max(steps)
        result.max_step = top if result.max_step is None else max(result.max_step, top)
        if top > trial.steps_done:
            updates["steps_done"] = min(top, trial.steps_planned) if trial.steps_planned else top
    validations = [record for record in records if record.kind == MetricKind.VALIDATION]
    if validations:
        # Of two reports of one step, the later.
        latest = max(reversed(validations), key=lambda record: record.step)
        if trial.latest_step is None or latest.step >= trial.latest_step:
            updates["latest_step"] = latest.step
            for metric, column in SUMMARY_METRICS.items():
                updates[column] = latest.metrics.get(metric)
    with transaction.atomic():
        for kind in {kind for kind, _ in by_step}:
            # What these steps held before (an earlier run's report of the same step) goes first.
            stale = MetricPoint.objects.filter(trial=trial, kind=kind, step__in=[s for k, s in by_step if k == kind])
            stale.delete()
        if points:
            points_upsert(points)
        if updates:
            Trial.objects.filter(pk=trial.pk).update(**updates)  # type: ignore[arg-type]
        if "latest_step" in updates:
            trial_verdicts_update(trial=trial, step=latest.step, metrics=latest.metrics)
    for column, value in updates.items():
        setattr(trial, column, value)
    result.records += len(records)
    result.points += len(points)
