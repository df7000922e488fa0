from __future__ import annotations

import dataclasses
import logging
import shutil
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.audits import rules, selectors
from auditportal.audits.models import PredictionAudit, QueuedPredictionAudit, QueuedStatus, WhatIf
from auditportal.audits.signals import prediction_audit_retired
from auditportal.datasets.services import dataset_read_limits
from auditportal.evidence.models import FreezeTrigger, VerdictDocument
from auditportal.evidence.services import verdict_document_store
from auditportal.fairness.documents import verdict_documents
from auditportal.fairness.errors import UserError
from auditportal.fairness.files import tabular
from auditportal.fairness.files.tabular import DatasetError
from auditportal.fairness.statistics import whatif
from auditportal.fairness.statistics.audit import AuditSpec, AuditSpecError, audit_predictions
from auditportal.lib.files import FILE_MODE, private_dir
from auditportal.outbox.services import task_enqueue
from auditportal.policies.models import FairnessPolicy
from auditportal.policies.selectors import policy_active

logger = logging.getLogger(__name__)

RETIRE_REASON_MAX_LENGTH = 2000


# What the fairness policy decides, not the person running an audit.
POLICY_PARAMETERS = ("tolerance", "alpha")


class SetByPolicy(UserError):
    def __init__(self, field: str, policy: FairnessPolicy) -> None:
        super().__init__(
            f"set by the fairness policy (version {policy.version}); administrators change it on /policy/",
            field=field,
        )


def refuse_policy_parameters(given: list[str]) -> None:
    """Raise SetByPolicy for the first policy parameter a request tried to set."""
    for field in POLICY_PARAMETERS:
        if field in given:
            raise SetByPolicy(field, policy_active())


def prediction_audit_run(
    *,
    user: User,
    source: Path,
    original_name: str,
    spec: AuditSpec,
    sha256: str | None = None,
    limits: tabular.ReadLimits | None = None,
) -> PredictionAudit:
    """Audit the predictions in ``source`` and store the result; the file itself is not kept.

    The active fairness policy decides the tolerance, alpha, judged metrics and minimum group size
    (whatever ``spec`` says about them); the audit records its version.

    ``sha256`` is the digest of ``source`` when it was taken as the file was received (uploads);
    otherwise the file is hashed as it is read. Raises DatasetError for problems with the file and
    AuditSpecError for impossible parameters (both UserErrors).
    """
    rules.check_run(user)
    policy = policy_active()
    spec = dataclasses.replace(
        spec,
        tolerance=policy.tolerance,
        alpha=policy.alpha,
        metrics=tuple(policy.metrics),
        min_group_size=policy.min_group_size,
    )
    spec.check()
    tabular.check_file_name(original_name)
    if not source.is_file():
        raise DatasetError("the file does not exist or is not a regular file", file=original_name)
    outcome = audit_predictions(
        source,
        spec,
        display_name=original_name,
        max_bytes=settings.DATASET_MAX_UPLOAD_BYTES,
        sha256=sha256,
        policy=policy.as_document(),
        limits=limits or dataset_read_limits(),
    )
    with transaction.atomic():
        audit = PredictionAudit.objects.create(
            created_by=user,
            original_name=original_name,
            file_format=outcome.file_format,
            sha256=outcome.sha256,
            size_bytes=outcome.size_bytes,
            num_rows=outcome.num_rows,
            parameters=spec.parameters(),
            result=outcome.document,
            verdict=outcome.document["verdict"] or "",
            policy=policy,
        )
        event_record(
            actor=user,
            verb=Verb.PREDICTION_AUDIT_CREATED,
            target=audit,
            data={
                "file": original_name,
                "sha256": outcome.sha256,
                "rows": outcome.num_rows,
                "verdict": outcome.document["verdict"],
                "policy": policy.version,
            },
        )
        verdict_document_freeze_prediction_audit(audit=audit)
    logger.info("%s: %d rows, verdict %s", audit, audit.num_rows, audit.verdict or "none")
    return audit


def verdict_document_freeze_prediction_audit(*, audit: PredictionAudit) -> VerdictDocument:
    """Freeze a prediction audit's document; call inside the transaction that stores the audit."""
    policy = audit.policy or policy_active()
    document = verdict_documents.prediction_audit_document(
        result=audit.result,
        file_name=audit.original_name,
        sha256=audit.sha256,
        rows=audit.num_rows,
        parameters=audit.parameters,
        policy=policy.as_document(),
    )
    return verdict_document_store(
        frozen=verdict_documents.freeze(document),
        policy=policy,
        trigger=FreezeTrigger.CREATED,
        prediction_audit_id=audit.pk,
    )


def prediction_audit_retire(*, user: User, audit: PredictionAudit, reason: str) -> PredictionAudit:
    """Mark ``audit`` as no longer to be relied on. It stays, with its document; nothing is deleted.

    Allowed for the audit's author, a reviewer or an administrator (PermissionDenied otherwise).
    A reason is required and an audit is retired once (UserError).
    """
    rules.check_retire(user, audit)
    reason = reason.strip()
    if not reason:
        raise UserError("Say why this audit is retired.", field="reason")
    if len(reason) > RETIRE_REASON_MAX_LENGTH:
        raise UserError(f"Keep the reason under {RETIRE_REASON_MAX_LENGTH} characters.", field="reason")
    with transaction.atomic():
        # A conditional UPDATE: of two people retiring at once, exactly one succeeds.
        retired = PredictionAudit.objects.filter(pk=audit.pk, retired_at__isnull=True).update(
            retired_at=timezone.now(), retired_by=user, retired_reason=reason
        )
        audit.refresh_from_db()
        if not retired:
            raise UserError(
                f"This audit was already retired on {audit.retired_at:%Y-%m-%d %H:%M} UTC"
                f" by {audit.retired_by or 'an unknown user'}."
            )
        event_record(actor=user, verb=Verb.PREDICTION_AUDIT_RETIRED, target=audit, data={"reason": reason})
        prediction_audit_retired.send(sender=PredictionAudit, audit=audit, by=user, reason=reason)
    logger.info("%s retired by %s", audit, user)
    return audit


# ---------------------------------------------------------------------------------------- large files
#
# A prediction file over AUDIT_INLINE_MAX_SIZE (or a Parquet file declaring more than
# AUDIT_INLINE_MAX_ROWS rows) is not audited in the web request: prediction_audit_queue keeps it
# after the checks that read no data and queues prediction_audit_run_queued for a worker, which
# audits it with prediction_audit_run (the same audit, event and frozen document) and removes it.
# The page and the API poll the queued audit's status meanwhile. The CLI always audits inline.

QUEUED_RUN_STALE = timedelta(hours=1)  # a run this old without an end is taken for a dead worker's
QUEUED_INTERNAL_ERROR = (
    "The worker failed on this file with an internal error (it is in the worker's log); "
    "try again, or tell an administrator."
)


def prediction_audit_runs_inline(*, source: Path) -> bool:
    """Whether an audit of ``source`` is small enough for the web request."""
    if source.stat().st_size > settings.AUDIT_INLINE_MAX_BYTES:
        return False
    rows = tabular.declared_rows(source)
    return rows is None or rows <= settings.AUDIT_INLINE_MAX_ROWS


def inline_read_limits() -> tabular.ReadLimits:
    """What an audit in the web request may decode: 8 bytes a byte of AUDIT_INLINE_MAX_SIZE (what a
    CSV file of that size can decode to at most), never more than DATASET_MAX_DECOMPRESSED_SIZE. A
    small Parquet file whose dictionaries expand past it goes to the worker."""
    limits = dataset_read_limits()
    inline = 8 * settings.AUDIT_INLINE_MAX_BYTES
    bound = inline if limits.decompressed_bytes is None else min(inline, limits.decompressed_bytes)
    return dataclasses.replace(limits, decompressed_bytes=bound)


def prediction_audit_submit(
    *, user: User, source: Path, original_name: str, spec: AuditSpec, sha256: str | None = None
) -> PredictionAudit | QueuedPredictionAudit:
    """The web form's and the API's audit of an upload: made in the request when the file is small
    (prediction_audit_runs_inline) and decodes within inline_read_limits, queued for a worker
    otherwise (prediction_audit_queue). The command calls prediction_audit_run."""
    if prediction_audit_runs_inline(source=source):
        try:
            return prediction_audit_run(
                user=user,
                source=source,
                original_name=original_name,
                spec=spec,
                sha256=sha256,
                limits=inline_read_limits(),
            )
        except tabular.DecodedSizeError as exc:
            # Larger once decoded than the request reads; the worker reads it under the full limit.
            logger.info("%s: queued for a worker (%s)", original_name, exc)
    return prediction_audit_queue(user=user, source=source, original_name=original_name, spec=spec, sha256=sha256)


def _queued_root() -> Path:
    return private_dir(Path(settings.DATASET_STORAGE_DIR) / "audit-uploads")


def _spec_as_json(spec: AuditSpec) -> dict[str, object]:
    return dict(spec.parameters())


def _spec_from_json(parameters: dict[str, object]) -> AuditSpec:
    values = {key: tuple(value) if isinstance(value, list) else value for key, value in parameters.items()}
    return AuditSpec(**values)  # type: ignore[arg-type]


def prediction_audit_queue(
    *, user: User, source: Path, original_name: str, spec: AuditSpec, sha256: str | None = None
) -> QueuedPredictionAudit:
    """Keep ``source`` (moved into the store) and queue its audit for a worker.

    What can be checked without reading the data is checked here, so that a wrong name, kind or
    size, a CSV file's header or a Parquet file's metadata over the read limits is refused at once
    and nothing is kept: the policy's parameters against ``spec``, the file's name, size and kind.
    """
    rules.check_run(user)
    policy = policy_active()
    dataclasses.replace(
        spec,
        tolerance=policy.tolerance,
        alpha=policy.alpha,
        metrics=tuple(policy.metrics),
        min_group_size=policy.min_group_size,
    ).check()
    tabular.check_file_name(original_name)
    if not source.is_file():
        raise DatasetError("the file does not exist or is not a regular file", file=original_name)
    tabular.check_file(
        source,
        display_name=original_name,
        max_bytes=settings.DATASET_MAX_UPLOAD_BYTES,
        limits=dataset_read_limits(),
    )
    size = source.stat().st_size
    directory = _queued_root() / uuid.uuid4().hex
    stored = directory / original_name
    try:
        private_dir(directory)
        shutil.move(source, stored)
        stored.chmod(FILE_MODE)
        with transaction.atomic():
            queued = QueuedPredictionAudit.objects.create(
                owner=user,
                original_name=original_name,
                storage_path=str(stored.relative_to(Path(settings.DATASET_STORAGE_DIR))),
                size_bytes=size,
                sha256=sha256 or "",
                parameters=_spec_as_json(spec),
            )
            event_record(
                actor=user,
                verb=Verb.PREDICTION_AUDIT_QUEUED,
                target=queued,
                # sha256 None: the upload gave none, the worker hashes the file (its audit's event
                # records that SHA-256).
                data={"file": original_name, "size_bytes": size, "sha256": sha256 or None},
            )
            task_enqueue(name="audits.run_queued_prediction_audit", args=[str(queued.pk)])
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    logger.info("%s: queued for a worker (%d bytes)", queued, size)
    return queued


def prediction_audit_run_queued(*, queued_id: uuid.UUID | str) -> PredictionAudit | None:
    """The worker's half: claim a queued audit, run it, and record the outcome.

    The audit, its event and its frozen document are those of prediction_audit_run, stored in the
    transaction that marks the queued audit ``done``; a file or parameters the audit refuses (a
    UserError naming file, row and column), or an owner who lost the role, end it ``failed`` with
    the reason. Idempotent: a delivery of a task whose audit is done or failed does nothing; one
    whose run was cut short by a dead worker (``running`` past QUEUED_RUN_STALE) runs it again.
    """
    now = timezone.now()
    claimable = models.Q(status=QueuedStatus.QUEUED) | models.Q(
        status=QueuedStatus.RUNNING, started_at__lt=now - QUEUED_RUN_STALE
    )
    if not QueuedPredictionAudit.objects.filter(claimable, pk=queued_id).update(
        status=QueuedStatus.RUNNING, started_at=now
    ):
        return None
    queued = QueuedPredictionAudit.objects.select_related("owner").get(pk=queued_id)
    try:
        with transaction.atomic():
            audit = prediction_audit_run(
                user=queued.owner,
                source=queued.path,
                original_name=queued.original_name,
                spec=_spec_from_json(queued.parameters),
                sha256=queued.sha256 or None,
            )
            QueuedPredictionAudit.objects.filter(pk=queued.pk).update(
                status=QueuedStatus.DONE, audit=audit, finished_at=timezone.now()
            )
    except (UserError, PermissionDenied) as exc:
        _queued_fail(queued, str(exc))
        return None
    except BaseException:
        _queued_fail(queued, QUEUED_INTERNAL_ERROR)
        raise
    shutil.rmtree(queued.path.parent, ignore_errors=True)
    return audit


def _queued_fail(queued: QueuedPredictionAudit, error: str) -> None:
    shutil.rmtree(queued.path.parent, ignore_errors=True)
    QueuedPredictionAudit.objects.filter(pk=queued.pk, status=QueuedStatus.RUNNING).update(
        status=QueuedStatus.FAILED, error=error, finished_at=timezone.now()
    )


# ---------------------------------------------------------------------------------------- what-if
#
# A what-if keeps a scored file's scores sorted per cell and label (fairness/statistics/whatif), so
# that any thresholds are judged with a binary search per cell; docs/whatif.md. A file too large
# for the web request is prepared by a worker, as a large audit is.


def _whatif_root() -> Path:
    return private_dir(Path(settings.DATASET_STORAGE_DIR) / "whatif")


def _policy_spec(spec: AuditSpec, policy: FairnessPolicy) -> AuditSpec:
    return dataclasses.replace(
        spec,
        tolerance=policy.tolerance,
        alpha=policy.alpha,
        metrics=tuple(policy.metrics),
        min_group_size=policy.min_group_size,
    )


def _whatif_check_spec(spec: AuditSpec, policy: FairnessPolicy) -> AuditSpec:
    if not spec.score:
        raise AuditSpecError(
            "score",
            "a what-if needs a score column: it moves the threshold over the scores, which a 0/1 prediction "
            "column does not have",
        )
    if spec.threshold is None:
        spec = dataclasses.replace(spec, threshold=0.5)
    spec = _policy_spec(spec, policy)
    spec.check()
    return spec


def whatif_start(*, user: User, source: Path, original_name: str, spec: AuditSpec, sha256: str | None = None) -> WhatIf:
    """Start a what-if from the scored file ``source`` (an upload): prepared in the request when the
    file is small enough for an inline audit, else kept and queued for a worker (status ``queued``).

    Refuses a spec without a score column (AuditSpecError naming ``score``) and what an audit
    refuses; the policy in force decides tolerance, alpha, metrics and minimum group size."""
    rules.check_run(user)
    policy = policy_active()
    spec = _whatif_check_spec(spec, policy)
    tabular.check_file_name(original_name)
    if not source.is_file():
        raise DatasetError("the file does not exist or is not a regular file", file=original_name)
    directory = _whatif_root() / uuid.uuid4().hex
    if prediction_audit_runs_inline(source=source):
        try:
            prepared = whatif.prepare(
                source,
                spec,
                display_name=original_name,
                max_bytes=settings.DATASET_MAX_UPLOAD_BYTES,
                sha256=sha256,
                limits=inline_read_limits(),
            )
        except tabular.DecodedSizeError as exc:
            logger.info("%s: what-if queued for a worker (%s)", original_name, exc)
        else:
            try:
                with transaction.atomic():
                    item = WhatIf(created_by=user, original_name=original_name, size_bytes=source.stat().st_size)
                    item.parameters, item.policy = spec.parameters(), policy
                    _whatif_store(item, prepared, directory)
                    item.save()
                    _whatif_started_event(item, user)
            except BaseException:
                shutil.rmtree(directory, ignore_errors=True)
                raise
            return item
    tabular.check_file(
        source, display_name=original_name, max_bytes=settings.DATASET_MAX_UPLOAD_BYTES, limits=dataset_read_limits()
    )
    stored = directory / original_name
    try:
        private_dir(directory)
        size = source.stat().st_size
        shutil.move(source, stored)
        stored.chmod(FILE_MODE)
        with transaction.atomic():
            item = WhatIf.objects.create(
                created_by=user,
                original_name=original_name,
                size_bytes=size,
                sha256=sha256 or "",
                parameters=spec.parameters(),
                policy=policy,
                upload_path=str(stored.relative_to(Path(settings.DATASET_STORAGE_DIR))),
            )
            _whatif_started_event(item, user)
            task_enqueue(name="audits.prepare_whatif", args=[item.pk])
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return item


def _whatif_started_event(item: WhatIf, user: User) -> None:
    event_record(
        actor=user,
        verb=Verb.WHATIF_STARTED,
        target=item,
        data={
            "file": item.original_name,
            "sha256": item.sha256 or None,
            "rows": item.num_rows,
            "prepared_sha256": item.prepared_sha256 or None,
            "status": item.status,
        },
    )


def _whatif_store(item: WhatIf, prepared: whatif.Prepared, directory: Path) -> None:
    """Write the sorted scores into the store and fill ``item`` with what reads them."""
    private_dir(directory)
    target = directory / "scores.npy"
    prepared_sha256 = whatif.save_scores(prepared.scores, target)
    target.chmod(FILE_MODE)
    item.sha256 = str(prepared.file["sha256"])
    item.file_format = str(prepared.file["format"])
    item.num_rows = prepared.num_rows
    item.prepared = prepared.meta()
    item.scores_path = str(target.relative_to(Path(settings.DATASET_STORAGE_DIR)))
    item.prepared_sha256 = prepared_sha256
    item.status = QueuedStatus.DONE
    item.finished_at = timezone.now()


def whatif_prepare_queued(*, whatif_id: int) -> WhatIf | None:
    """The worker's half: claim a queued what-if, prepare its file, store the scores; idempotent
    (a done or failed one is left alone, a run older than QUEUED_RUN_STALE is taken again)."""
    now = timezone.now()
    claimable = models.Q(status=QueuedStatus.QUEUED) | models.Q(
        status=QueuedStatus.RUNNING, started_at__lt=now - QUEUED_RUN_STALE
    )
    if not WhatIf.objects.filter(claimable, pk=whatif_id).update(status=QueuedStatus.RUNNING, started_at=now):
        return None
    item = WhatIf.objects.select_related("created_by").get(pk=whatif_id)
    upload = item.upload_file
    try:
        prepared = whatif.prepare(
            upload,
            _spec_from_json(item.parameters),
            display_name=item.original_name,
            max_bytes=settings.DATASET_MAX_UPLOAD_BYTES,
            sha256=item.sha256 or None,
            limits=dataset_read_limits(),
        )
        with transaction.atomic():
            _whatif_store(item, prepared, upload.parent)
            item.upload_path = ""
            item.save()
    except UserError as exc:
        _whatif_fail(item, str(exc))
        return None
    except BaseException:
        _whatif_fail(item, QUEUED_INTERNAL_ERROR)
        raise
    upload.unlink(missing_ok=True)
    return item


def _whatif_fail(item: WhatIf, error: str) -> None:
    shutil.rmtree(item.upload_file.parent, ignore_errors=True)
    WhatIf.objects.filter(pk=item.pk, status=QueuedStatus.RUNNING).update(
        status=QueuedStatus.FAILED, error=error, finished_at=timezone.now(), upload_path=""
    )


def whatif_freeze(*, user: User, item: WhatIf, thresholds: whatif.Thresholds) -> PredictionAudit:
    """Make a real prediction audit, and its verdict document, of the what-if at ``thresholds``.

    Judged under the policy in force now, as any audit; the stored scores are hashed again first and
    must match ``prepared_sha256`` (UserError otherwise). The audit records the thresholds per group
    and both SHA-256s in its parameters and its document (``prediction.thresholds``)."""
    rules.check_run(user)
    if not item.is_ready:
        raise UserError("This what-if is not prepared yet.")
    if tabular.file_sha256(item.scores_file) != item.prepared_sha256:
        raise UserError("The what-if's stored scores no longer match their SHA-256; start it again from the file.")
    policy = policy_active()
    prepared = selectors.whatif_load(item=item)
    prepared = dataclasses.replace(prepared, spec=_policy_spec(prepared.spec, policy))
    document = whatif.document_at(prepared, thresholds, policy=policy.as_document())
    document["prediction"]["thresholds"] = thresholds.as_json()
    document["prediction"]["whatif"] = {"id": item.pk, "prepared_sha256": item.prepared_sha256}
    parameters = {
        **dataclasses.replace(prepared.spec, threshold=thresholds.threshold).parameters(),
        "thresholds": thresholds.as_json(),
        "whatif": {"id": item.pk, "prepared_sha256": item.prepared_sha256},
    }
    with transaction.atomic():
        audit = PredictionAudit.objects.create(
            created_by=user,
            original_name=item.original_name,
            file_format=item.file_format,
            sha256=item.sha256,
            size_bytes=item.size_bytes,
            num_rows=item.num_rows or 0,
            parameters=parameters,
            result=document,
            verdict=document["verdict"] or "",
            policy=policy,
        )
        event_record(
            actor=user,
            verb=Verb.PREDICTION_AUDIT_CREATED,
            target=audit,
            data={
                "file": item.original_name,
                "sha256": item.sha256,
                "rows": item.num_rows,
                "verdict": document["verdict"],
                "policy": policy.version,
                "whatif": item.pk,
            },
        )
        event_record(
            actor=user,
            verb=Verb.WHATIF_FROZEN,
            target=item,
            data={"audit": audit.pk, "thresholds": thresholds.as_json(), "prepared_sha256": item.prepared_sha256},
        )
        verdict_document_freeze_prediction_audit(audit=audit)
    return audit
