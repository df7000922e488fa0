"""Production batches: received (idempotent by the client's batch id), counted and judged by a worker,
and labels that arrive later (docs/monitoring.md, "Production batches").

The request keeps the file (or the checked counts) and queues ``monitoring.count_batch`` through the
outbox; the worker counts the file outside any transaction, then, under the deployment's row lock,
writes the counts once, gives the batch its position in the serving model's window and writes the
Look. A second worker on the same batch finds it counted and writes nothing; two workers on two
batches of one deployment queue on the lock, so each window sums every counted batch exactly once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import shutil
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.fairness.errors import UserError
from auditportal.fairness.figures.lookpoints import look_points
from auditportal.fairness.files import tabular
from auditportal.fairness.files.tabular.read import check_columns_present
from auditportal.fairness.statistics import batchcount
from auditportal.fairness.statistics.batchcount import AttributeCounts, BatchColumns
from auditportal.fairness.statistics.monitor import (
    DriftLimit,
    GapLimit,
    LookJudgement,
    MonitorPolicy,
    RateLimit,
    judge_look,
)
from auditportal.fairness.statistics.sequential import Bound, MonitorPolicyError, worst_status
from auditportal.lib.files import FILE_MODE, private_dir
from auditportal.monitoring import selectors
from auditportal.monitoring.models import (
    BatchFormat,
    BatchLabels,
    BatchState,
    Deployment,
    DeploymentChange,
    Look,
    PredictionBatch,
)
from auditportal.monitoring.selectors import ModelReference
from auditportal.monitoring.services.breach import breach_confirm
from auditportal.monitoring.services.common import deployment_lock
from auditportal.monitoring.spec import METRICS, MonitorSpec
from auditportal.outbox.services import task_enqueue

logger = logging.getLogger(__name__)

BATCH_ID: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$")
COUNT_TASK: Final = "monitoring.count_batch"
LABELS_TASK: Final = "monitoring.count_labels"
# A rate limit at 0 cannot be a confidence sequence's centre; the smallest rate judged instead.
_SMALLEST_RATE: Final = 1e-6


class BatchError(UserError):
    """A batch the user must fix; ``field`` names what (``batch_id``, ``file``, a column)."""


class BatchConflict(UserError):
    """The batch id is taken by other content (409): nothing changed."""


@dataclass(frozen=True)
class Received:
    batch: PredictionBatch
    created: bool  # False: the same id and content were posted before (200 with that batch)


def batch_id_checked(value: object) -> str:
    text = value if isinstance(value, str) else ""
    if not BATCH_ID.match(text):
        raise BatchError(
            "A batch id is 1 to 100 characters: letters, digits, '.', '_', ':' and '-', starting with a letter "
            f"or a digit, not {str(value)[:120]!r}.",
            field="batch_id",
        )
    return text


def _model_checked(deployment: Deployment, model: str) -> str:
    """The model the batch's predictions came from: the one serving now by default; otherwise one the
    deployment served (its changes name it), so late batches of a model rolled back stay evidence."""
    model = model.strip()
    if not model:
        if not deployment.serves:
            raise BatchError(
                f"Nothing serves in {deployment.name} ({deployment.state}): name the model the predictions came from.",
                field="model",
            )
        return deployment.model_identifier
    if not deployment.changes.filter(model_identifier=model).exists():
        raise BatchError(f"{model[:120]!r} never served in {deployment.name}.", field="model")
    return model


def _existing(deployment: Deployment, batch_id: str, sha256: str) -> PredictionBatch | None:
    found = PredictionBatch.objects.filter(deployment=deployment, batch_id=batch_id).first()
    if found is None:
        return None
    if found.sha256 != sha256:
        raise BatchConflict(
            f"Batch {batch_id!r} of {deployment.name} was posted on {found.received_at:%Y-%m-%d %H:%M:%S} UTC "
            f"with other content (SHA-256 {found.sha256[:12]}…); nothing changed. A batch id names one content.",
            field="batch_id",
        )
    return found


def _store_root() -> Path:
    return private_dir(Path(settings.DATASET_STORAGE_DIR) / "monitoring-batches")


def _keep(source: Path, name: str) -> str:
    directory = _store_root() / uuid.uuid4().hex
    private_dir(directory)
    stored = directory / name
    shutil.move(source, stored)
    stored.chmod(FILE_MODE)
    return str(stored.relative_to(Path(settings.DATASET_STORAGE_DIR)))


def _discard(storage_path: str) -> None:
    if storage_path:
        shutil.rmtree((Path(settings.DATASET_STORAGE_DIR) / storage_path).parent, ignore_errors=True)


PENDING_FILE: Final = "pending.parquet"


def _pending_keep(pending: batchcount.PendingRows) -> str:
    """A batch's pending rows as a Parquet side file in a folder of its own; its path relative to
    DATASET_STORAGE_DIR."""
    stored = _pending_place()
    _pending_write(pending, stored)
    return stored


def _pending_place() -> str:
    """A new folder for a side file; the file's path relative to DATASET_STORAGE_DIR (not written yet)."""
    directory = _store_root() / uuid.uuid4().hex
    private_dir(directory)
    return str((directory / PENDING_FILE).relative_to(Path(settings.DATASET_STORAGE_DIR)))


def _pending_write(pending: batchcount.PendingRows, relative: str) -> None:
    import pyarrow.parquet as pq

    stored = Path(settings.DATASET_STORAGE_DIR) / relative
    # lz4: the fastest write measured (a million keys: 4.5 MiB, read back in about 0.1 s); kept only until
    # labelled. Only the groups dictionary-encoded (they arrive so; unique keys would be hashed for a
    # dictionary only to fall back to plain values) and no min/max statistics (never read): about half
    # the time of a default write (50-80 ms instead of 85-145 ms for a million pending rows, measured).
    groups = [name for name in pending.table.column_names if name.startswith("group_")]
    # pyarrow-stubs type use_dictionary as a bool; pyarrow takes a list of column names too.
    pq.write_table(
        pending.table,
        stored,
        compression="lz4",
        use_dictionary=groups,  # type: ignore[arg-type]
        write_statistics=False,
    )
    stored.chmod(FILE_MODE)


def _pending_read(pending_path: str) -> batchcount.PendingRows:
    import pyarrow.parquet as pq

    return batchcount.PendingRows(pq.read_table(Path(settings.DATASET_STORAGE_DIR) / pending_path))


def _header(path: Path, display_name: str) -> list[str]:
    """A file's column names, read without its data (a CSV file's header, a Parquet file's schema)."""
    file_format = tabular.check_file(
        path,
        display_name=display_name,
        max_bytes=settings.MONITORING_BATCH_MAX_BYTES,
        limits=tabular.ReadLimits(
            rows=settings.DATASET_MAX_ROWS, decompressed_bytes=settings.DATASET_MAX_DECOMPRESSED_BYTES
        ),
    )
    if file_format == "csv":
        from auditportal.fairness.files.tabular.read import _sniff_csv

        return _sniff_csv(path, display_name)
    import pyarrow.parquet as pq

    return list(pq.ParquetFile(path).schema_arrow.names)


def batch_columns(parameters: Mapping[str, Any], attributes: Sequence[str]) -> BatchColumns:
    threshold = parameters.get("threshold")
    return BatchColumns(
        attributes=tuple(attributes),
        prediction=str(parameters.get("prediction") or ""),
        score=str(parameters.get("score") or ""),
        threshold=None if threshold is None else float(threshold),
        label=str(parameters.get("label") or ""),
        positive=str(parameters.get("positive") or "1"),
        row_key=str(parameters.get("row_key") or ""),
    )


def batch_receive_file(
    *,
    deployment: Deployment,
    user: User,
    batch_id: str,
    source: Path,
    original_name: str,
    sha256: str,
    model: str = "",
    prediction: str = "",
    score: str = "",
    threshold: float | None = None,
    label: str = "",
    positive: str = "1",
    row_key: str = "",
) -> Received:
    """Keep a CSV or Parquet batch and queue its counting. Same id and content: the batch posted
    before; same id, other content: BatchConflict. The columns are checked against the file's header
    here (a missing one is a DatasetError naming it); the values by the worker."""
    batch_id = batch_id_checked(batch_id)
    existing = _existing(deployment, batch_id, sha256)
    if existing is not None:
        return Received(existing, created=False)
    model = _model_checked(deployment, model)
    reference = selectors.model_reference(deployment=deployment, model_identifier=model)
    tabular.check_file_name(original_name)
    file_format = "csv" if original_name.lower().endswith(".csv") else "parquet"
    if bool(prediction) == bool(score):
        raise BatchError(
            "Name the prediction column, or the score column with a threshold (one of them).", field="prediction"
        )
    if score and (threshold is None or not math.isfinite(threshold)):
        raise BatchError("A score column needs a threshold (a number).", field="threshold")
    parameters = {
        "original_name": original_name,
        "prediction": prediction,
        "score": score,
        "threshold": threshold,
        "label": label,
        "positive": positive.strip() or "1",
        "row_key": row_key,
        "attributes": list(reference.attributes),
    }
    columns = batch_columns(parameters, reference.attributes)
    declared = [
        (prediction or score, "prediction" if prediction else "score"),
        *((name, "sensitive attribute") for name in reference.attributes),
        *([(label, "label")] if label else []),
        *([(row_key, "row key")] if row_key else []),
    ]
    check_columns_present(_header(source, original_name), declared, original_name)
    del columns
    size = source.stat().st_size
    storage_path = _keep(source, original_name)
    try:
        return _create(
            deployment=deployment,
            user=user,
            batch_id=batch_id,
            model=model,
            sha256=sha256,
            file_format=file_format,
            size=size,
            parameters=parameters,
            storage_path=storage_path,
        )
    except BaseException:
        _discard(storage_path)
        raise


def batch_receive_counts(
    *, deployment: Deployment, user: User, batch_id: str, counts: object, model: str = ""
) -> Received:
    """Keep a batch of pre-aggregated counts (checked here) and queue its judging. Its SHA-256 is that
    of the counts' canonical JSON (sorted keys, no spaces)."""
    batch_id = batch_id_checked(batch_id)
    canonical = json.dumps(counts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    sha256 = hashlib.sha256(canonical.encode()).hexdigest()
    existing = _existing(deployment, batch_id, sha256)
    if existing is not None:
        return Received(existing, created=False)
    model = _model_checked(deployment, model)
    reference = selectors.model_reference(deployment=deployment, model_identifier=model)
    rows, checked = batchcount.counts_from_json(counts, reference.attributes)
    parameters = {
        "attributes": list(reference.attributes),
        "rows": rows,
        "counts": {name: checked[name].as_json() for name in reference.attributes},
    }
    return _create(
        deployment=deployment,
        user=user,
        batch_id=batch_id,
        model=model,
        sha256=sha256,
        file_format=BatchFormat.COUNTS,
        size=len(canonical.encode()),
        parameters=parameters,
        storage_path="",
    )


def _create(
    *,
    deployment: Deployment,
    user: User,
    batch_id: str,
    model: str,
    sha256: str,
    file_format: str,
    size: int,
    parameters: dict[str, Any],
    storage_path: str,
) -> Received:
    try:
        with transaction.atomic():
            batch = PredictionBatch.objects.create(
                deployment=deployment,
                batch_id=batch_id,
                model_identifier=model,
                sha256=sha256,
                format=file_format,
                size_bytes=size,
                parameters=parameters,
                received_by=user,
                storage_path=storage_path,
            )
            task_enqueue(name=COUNT_TASK, args=[batch.pk])
    except IntegrityError:
        # Another request took the id first: the same answer as if it had come earlier.
        if storage_path:
            _discard(storage_path)
        existing = _existing(deployment, batch_id, sha256)
        if existing is None:
            raise
        return Received(existing, created=False)
    return Received(batch, created=True)


# --------------------------------------------------------------------------- the worker's side


def batch_count(*, batch_id: int) -> PredictionBatch:
    """Count a received batch and judge its window (the task ``monitoring.count_batch``). Idempotent:
    a batch already counted or failed is returned as it is."""
    batch = PredictionBatch.objects.select_related("deployment").get(pk=batch_id)
    if batch.state != BatchState.RECEIVED:
        return batch
    attributes = list(batch.parameters["attributes"])
    pending = None
    try:
        if batch.format == BatchFormat.COUNTS:
            rows = int(batch.parameters["rows"])
            counts = {name: AttributeCounts.from_json(batch.parameters["counts"][name]) for name in attributes}
        else:
            counted = batchcount.count_batch_file(
                Path(settings.DATASET_STORAGE_DIR) / batch.storage_path,
                batch_columns(batch.parameters, attributes),
                display_name=str(batch.parameters.get("original_name", batch.batch_id)),
                max_bytes=settings.MONITORING_BATCH_MAX_BYTES,
                limits=tabular.ReadLimits(
                    rows=settings.DATASET_MAX_ROWS, decompressed_bytes=settings.DATASET_MAX_DECOMPRESSED_BYTES
                ),
            )
            rows, counts, pending = counted.rows, counted.counts, counted.pending
    except UserError as exc:
        return _fail(batch, exc)
    if pending is None or not pending.rows:
        return _counted_write(batch, rows, counts, attributes, "", pending, None)
    # The side file (a file, not rows) is written by a thread while the transaction runs (pyarrow
    # writes without the GIL), and finished before the commit; discarded when this worker's write
    # rolls back or another worker counted the batch first.
    pending_path = _pending_place()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pending-side-file") as pool:
        writing = pool.submit(_pending_write, pending, pending_path)
        try:
            return _counted_write(batch, rows, counts, attributes, pending_path, pending, writing)
        except BaseException:
            wait([writing])
            _discard(pending_path)
            raise


def _counted_write(
    batch: PredictionBatch,
    rows: int,
    counts: Mapping[str, AttributeCounts],
    attributes: Sequence[str],
    pending_path: str,
    pending: batchcount.PendingRows | None,
    writing: Future[None] | None,
) -> PredictionBatch:
    batch_id = batch.pk
    with transaction.atomic():
        deployment = deployment_lock(deployment=batch.deployment)
        batch = PredictionBatch.objects.select_for_update().get(pk=batch_id)
        if batch.state != BatchState.RECEIVED:
            if writing is not None:
                wait([writing])
            transaction.on_commit(lambda: _discard(pending_path))
            return batch  # another worker counted it
        batch.rows = rows
        batch.counts = {name: counts[name].as_json() for name in attributes}
        batch.state = BatchState.COUNTED
        batch.counted_at = timezone.now()
        stored, batch.storage_path = batch.storage_path, ""
        change = _serving_change(deployment, batch.model_identifier)
        if change is not None:
            batch.serving_change = change
            last = PredictionBatch.objects.filter(serving_change=change).aggregate(last=Max("position"))["last"]
            batch.position = (last or 0) + 1
        batch.pending_path = pending_path
        batch.pending_rows = pending.rows if pending is not None else 0
        batch.save()
        spec = selectors.monitor_policy_active(deployment=deployment).monitor_spec
        if change is not None and rows >= spec.min_batch_rows:
            look_write(deployment=deployment, batch=batch)
        if writing is not None:
            writing.result()  # the side file is whole before the batch that names it commits (or raises)
        transaction.on_commit(lambda: _discard(stored))
    return batch


def _fail(batch: PredictionBatch, exc: UserError) -> PredictionBatch:
    with transaction.atomic():
        batch = PredictionBatch.objects.select_for_update().get(pk=batch.pk)
        if batch.state != BatchState.RECEIVED:
            return batch
        stored = batch.storage_path
        batch.state, batch.error, batch.error_field, batch.storage_path = (
            BatchState.FAILED,
            str(exc)[:4000],
            (exc.field or "")[:255],
            "",
        )
        batch.save(update_fields=["state", "error", "error_field", "storage_path"])
        transaction.on_commit(lambda: _discard(stored))
    return batch


def _serving_change(deployment: Deployment, model: str) -> DeploymentChange | None:
    """The change since which ``model`` serves in ``deployment`` now; None when it does not serve."""
    if not deployment.serves or deployment.model_identifier != model:
        return None
    return deployment.changes.order_by("-seq").first()


def window_of(position: int) -> int | None:
    size = settings.MONITORING_WINDOW_BATCHES
    return None if size == 0 else (position - 1) // size + 1


def window_counts(*, batch: PredictionBatch) -> tuple[list[PredictionBatch], dict[str, AttributeCounts]]:
    """The batches of ``batch``'s window (its model's era, its tumbling window) and their counts summed
    per attribute, with every counted label delta so far."""
    assert batch.position is not None
    assert batch.serving_change_id is not None
    batches = PredictionBatch.objects.filter(serving_change_id=batch.serving_change_id, state=BatchState.COUNTED)
    window = window_of(batch.position)
    if window is not None:
        size = settings.MONITORING_WINDOW_BATCHES
        batches = batches.filter(position__gt=(window - 1) * size, position__lte=window * size)
    members = list(batches.order_by("position"))
    attributes = list(batch.parameters["attributes"])
    total = {name: AttributeCounts() for name in attributes}
    for member in members:
        for name in attributes:
            total[name].add(AttributeCounts.from_json(_counted(member.counts, member)[name]))
    labels = BatchLabels.objects.filter(batch__in=members, state=BatchState.COUNTED)
    for delta in labels:
        for name in attributes:
            total[name].add(AttributeCounts.from_json(_counted(delta.counts, delta)[name]))
    return members, total


def _counted(counts: dict[str, Any] | None, of: PredictionBatch | BatchLabels) -> dict[str, Any]:
    """A counted batch's (or labels') counts: the state filter above guarantees they are there."""
    if counts is None:
        raise ValueError(f"{of} is counted but has no counts")
    return counts


def monitor_policy_of(
    spec: MonitorSpec, *, training: Mapping[str, int], training_unknown: int, attributes: int
) -> MonitorPolicy:
    """The statistics' policy for one sensitive attribute, from a deployment's MonitorSpec: the one
    mapping (docs/monitoring.md, "Production batches"). Its groups are the training data's (fixed
    before any production row: K is counted from them); the reference is the training data's largest
    group; the alpha is the spec's split over the ``attributes`` judged (Bonferroni); absolute
    limits of 1 (upper) or 0 (lower) bound nothing and are left out."""
    groups = tuple(sorted(training))
    reference = max(groups, key=lambda group: (training[group], [-ord(c) for c in group])) if groups else None
    rate_limits: list[RateLimit] = []
    gap_limits: list[GapLimit] = []
    for metric in METRICS:
        limits = spec.limits(metric)
        if limits.upper is not None and limits.upper < 1:
            rate_limits.append(RateLimit(metric, max(limits.upper, _SMALLEST_RATE), Bound.AT_MOST))
        if limits.lower is not None and limits.lower > 0:
            rate_limits.append(RateLimit(metric, limits.lower, Bound.AT_LEAST))
        if limits.gap is not None and limits.gap < 1 and len(groups) > 1:
            gap_limits.append(GapLimit(metric, limits.gap))
    drift = None
    if spec.share_shift is not None and spec.share_shift < 1 and sum(training.values()) + training_unknown > 0:
        drift = DriftLimit(limit=spec.share_shift, training=dict(training), training_unknown=training_unknown)
    return MonitorPolicy(
        groups=groups,
        reference=reference if gap_limits else None,
        rate_limits=tuple(rate_limits),
        gap_limits=tuple(gap_limits),
        drift=drift,
        alpha=spec.alpha / max(attributes, 1),
        min_rows=spec.min_group_rows,
    )


@dataclass(frozen=True)
class LookOutcome:
    """A look written, with the statistics' judgement per attribute (what breach handling needs)."""

    look: Look
    judgements: dict[str, LookJudgement]

    @property
    def breached(self) -> bool:
        return self.look.breached

    @property
    def breached_judgements(self) -> dict[str, LookJudgement]:
        return {name: judgement for name, judgement in self.judgements.items() if judgement.breached}


def look_judge(
    *, spec: MonitorSpec, reference: ModelReference, counts: Mapping[str, AttributeCounts], window: int | None
) -> dict[str, LookJudgement]:
    judgements = {}
    for name in reference.attributes:
        training, training_unknown = reference.training.get(name, ({}, 0))
        try:
            policy = monitor_policy_of(
                spec, training=training, training_unknown=training_unknown, attributes=len(reference.attributes)
            )
        except MonitorPolicyError:
            continue  # nothing to judge for this attribute (no training groups and no limit that needs none)
        attribute = counts[name]
        judgements[name] = judge_look(
            policy,
            {group: batchcount.window_counts(cells) for group, cells in attribute.groups.items()},
            unknown_rows=batchcount.window_counts(attribute.unknown).rows,
            window=window,
        )
    return judgements


def look_points_fields(judgements: Mapping[str, Any]) -> dict[str, Any]:
    """A look's ``points_layout`` and ``points``: what the deployment page's charts draw of its stored
    judgements (fairness/figures/lookpoints, which the migration that added them back-fills with)."""
    points = look_points(judgements)
    return {"points_layout": points.layout, "points": points.values}


def look_write(*, deployment: Deployment, batch: PredictionBatch, labels: BatchLabels | None = None) -> LookOutcome:
    """Judge ``batch``'s window and write the Look (inside the caller's transaction, under the
    deployment's row lock)."""
    policy = selectors.monitor_policy_active(deployment=deployment)
    spec = policy.monitor_spec
    reference = selectors.model_reference(deployment=deployment, model_identifier=batch.model_identifier)
    members, counts = window_counts(batch=batch)
    assert batch.position is not None
    window = window_of(batch.position)
    judgements = look_judge(spec=spec, reference=reference, counts=counts, window=window)
    statuses = [judgement.status for judgement in judgements.values() if judgement.status is not None]
    worst = worst_status(statuses)
    last = Look.objects.filter(deployment=deployment).aggregate(last=Max("seq"))["last"]
    stored = {name: judgement.as_json() for name, judgement in judgements.items()}
    look = Look.objects.create(
        deployment=deployment,
        seq=(last or 0) + 1,
        model_identifier=batch.model_identifier,
        policy=policy,
        window=window,
        batch=batch,
        labels=labels,
        batches=[member.batch_id for member in members],
        rows=sum(member.rows or 0 for member in members),
        judgements=stored,
        status="" if worst is None else worst.value,
        breached=any(judgement.breached for judgement in judgements.values()),
        **look_points_fields(stored),
    )
    outcome = LookOutcome(look, judgements)
    if outcome.breached and batch.serving_change_id is not None:
        # A confirmed breach, in this transaction and under the deployment's lock: the model suspended,
        # the deployment rolled back, an incident opened naming every attribute in breach. Nothing when
        # the model already has an open incident.
        breach_confirm(
            deployment=deployment,
            model_identifier=batch.model_identifier,
            judgements=outcome.breached_judgements,
            batch_ids=[member.pk for member in members],
            look_id=look.pk,
        )
    return outcome


# --------------------------------------------------------------------------- late labels


def labels_receive(
    *,
    batch: PredictionBatch,
    user: User,
    source: Path,
    original_name: str,
    sha256: str,
    row_key: str,
    label: str,
    positive: str = "1",
) -> tuple[BatchLabels, bool]:
    """Keep a labels file for ``batch`` (columns ``row_key`` and ``label``) and queue applying it. The
    same file again is the labels posted before (False)."""
    existing = BatchLabels.objects.filter(batch=batch, sha256=sha256).first()
    if existing is not None:
        return existing, False
    if batch.state == BatchState.FAILED:
        raise BatchError(
            f"Batch {batch.batch_id!r} failed to count ({batch.error}); it takes no labels.", field="batch_id"
        )
    if not (batch.parameters.get("row_key") or ""):
        raise BatchError(
            f"Batch {batch.batch_id!r} was posted without a row key column, so its rows cannot be labelled later.",
            field="row_key",
        )
    if not row_key or not label:
        raise BatchError("Name the row key column and the label column.", field="row_key" if not row_key else "label")
    tabular.check_file_name(original_name)
    check_columns_present(_header(source, original_name), [(row_key, "row key"), (label, "label")], original_name)
    size = source.stat().st_size
    storage_path = _keep(source, original_name)
    parameters = {
        "original_name": original_name,
        "row_key": row_key,
        "label": label,
        "positive": positive.strip() or "1",
    }
    try:
        with transaction.atomic():
            made = BatchLabels.objects.create(
                batch=batch,
                sha256=sha256,
                size_bytes=size,
                parameters=parameters,
                received_by=user,
                storage_path=storage_path,
            )
            task_enqueue(name=LABELS_TASK, args=[made.pk])
    except IntegrityError:
        _discard(storage_path)
        return BatchLabels.objects.get(batch=batch, sha256=sha256), False
    except BaseException:
        _discard(storage_path)
        raise
    return made, True


def labels_count(*, labels_id: int) -> BatchLabels:
    """Move the labelled rows of a batch from its pending rows into labelled cells (the delta is the
    BatchLabels' counts), keep the rows still pending in a new side file, and judge the window again.
    Waits for the batch to be counted (the task retries)."""
    labels = BatchLabels.objects.select_related("batch", "batch__deployment").get(pk=labels_id)
    if labels.state != BatchState.RECEIVED:
        return labels
    batch = labels.batch
    if batch.state == BatchState.RECEIVED:
        raise BatchNotCounted(batch.batch_id)
    try:
        rows = batchcount.read_labels(
            Path(settings.DATASET_STORAGE_DIR) / labels.storage_path,
            row_key=labels.parameters["row_key"],
            label=labels.parameters["label"],
            positive=labels.parameters["positive"],
            display_name=labels.parameters["original_name"],
            max_bytes=settings.MONITORING_BATCH_MAX_BYTES,
            limits=tabular.ReadLimits(rows=settings.DATASET_MAX_ROWS),
        )
    except UserError as exc:
        with transaction.atomic():
            locked = BatchLabels.objects.select_for_update().get(pk=labels_id)
            if locked.state == BatchState.RECEIVED:
                stored = locked.storage_path
                locked.state, locked.error, locked.error_field, locked.storage_path = (
                    BatchState.FAILED,
                    str(exc)[:4000],
                    (exc.field or "")[:255],
                    "",
                )
                locked.save()
                transaction.on_commit(lambda: _discard(stored))
            return locked
    attributes = list(batch.parameters["attributes"])
    written = ""
    try:
        with transaction.atomic():
            deployment = deployment_lock(deployment=batch.deployment)
            labels = BatchLabels.objects.select_for_update().get(pk=labels_id)
            if labels.state != BatchState.RECEIVED:
                return labels
            batch = PredictionBatch.objects.select_for_update().get(pk=batch.pk)
            previous = batch.pending_path
            applied = batchcount.labels_apply(_pending_read(previous) if previous else None, rows, attributes)
            delta, labelled, remaining = applied.delta, applied.labelled, applied.remaining
            stored = labels.storage_path
            labels.counts = {name: delta[name].as_json() for name in attributes}
            labels.labelled, labels.unmatched = labelled, applied.unmatched
            labels.state, labels.counted_at, labels.storage_path = BatchState.COUNTED, timezone.now(), ""
            labels.save()
            if labelled:
                # The rows still pending, in a new side file; the old one goes once this commits.
                written = _pending_keep(remaining) if remaining.rows else ""
                batch.pending_path, batch.pending_rows = written, remaining.rows
                batch.save(update_fields=["pending_path", "pending_rows"])
                transaction.on_commit(lambda: _discard(previous))
            if (
                labelled
                and batch.position is not None
                and _serving_change(deployment, batch.model_identifier) == batch.serving_change
            ):
                look_write(deployment=deployment, batch=batch, labels=labels)
            transaction.on_commit(lambda: _discard(stored))
    except BaseException:
        _discard(written)
        raise
    return labels


class BatchNotCounted(Exception):
    """Labels arrived before their batch was counted: the task retries later."""
