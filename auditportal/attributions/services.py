"""Why a trial's model has its gaps: per-group feature attributions of its checkpoint (docs/attributions.md).

The request is checked and stored as a pending attribution in the web request, with its event, and a
worker's task queued through the outbox in the same transaction. The worker runs the checkpoint on a
stratified sample of the validation rows (``python -m trainer.attribute`` in a subprocess: the portal
never imports torch or Captum), summarises the per-row attributions per group
(fairness/statistics/attributions.summarise) and stores the summary once, as canonical JSON with its
SHA-256, with its event; a failure is stored with its reason and its event.
"""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Final

import numpy as np
from django.db import IntegrityError, transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.attributions import rules
from auditportal.attributions.models import AttributionState, TrialAttribution
from auditportal.experiments import checkpoints
from auditportal.experiments.models import Trial
from auditportal.fairness.documents.canonical import canonical_json
from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics import attributions as attribution_statistics
from auditportal.outbox.services import task_enqueue

logger = logging.getLogger(__name__)

ATTRIBUTE_TASK: Final = "attributions.compute"
DOCUMENT_SCHEMA: Final = 1
# The sample of validation rows explained: Integrated Gradients takes about 2 s per 1,000 rows of a
# small MLP on one core here (bench/attributions.py), so the default answers in seconds and the
# largest in well under a minute.
DEFAULT_SAMPLE_SIZE: Final = 2000
MIN_SAMPLE_SIZE: Final = 100
MAX_SAMPLE_SIZE: Final = 20000
MAX_SEED: Final = 2**31 - 1
ATTRIBUTE_TIMEOUT_SECONDS: Final = 3600
FIELD: Final = "trial"
PURPOSE: Final = "explained"
CLUSTER_INSTEAD: Final = (
    "mount the cluster's shared_fs checkpoint storage read-only and name it in DET_CHECKPOINT_DIR, "
    "or explain a trial trained locally"
)


def check_sample(*, sample_size: int, seed: int) -> None:
    """Refuse a sample size or a seed out of range, naming the field."""
    if not MIN_SAMPLE_SIZE <= sample_size <= MAX_SAMPLE_SIZE:
        raise UserError(
            f"sample_size {sample_size} is not between {MIN_SAMPLE_SIZE:,} and {MAX_SAMPLE_SIZE:,} validation rows",
            field="sample_size",
        )
    if not 0 <= seed <= MAX_SEED:
        raise UserError(f"seed {seed} is not between 0 and {MAX_SEED:,}", field="seed")


def _inputs(trial: Trial) -> tuple[Path, str]:
    """The trial's checkpoint folder and the SHA-256 of its weights, or the refusal naming ``trial``."""
    folder = checkpoints.trial_checkpoint(trial, field=FIELD, purpose=PURPOSE, instead=CLUSTER_INSTEAD)
    checkpoints.trial_shards(trial, field=FIELD, checkpoint=folder)
    return folder, checkpoints.checkpoint_sha256(folder)


def _same_inputs(*, sha256: str, trial: Trial, sample_size: int, seed: int) -> TrialAttribution | None:
    return (
        TrialAttribution.objects.filter(
            checkpoint_sha256=sha256,
            dataset_version_id=trial.experiment.dataset_version_id,
            sample_size=sample_size,
            seed=seed,
        )
        .exclude(state=AttributionState.FAILED)
        .first()
    )


def attribution_request(
    *, user: User, trial: Trial, sample_size: int = DEFAULT_SAMPLE_SIZE, seed: int = 0, queue: bool = True
) -> tuple[TrialAttribution, bool]:
    """Check ``trial`` (already scoped to ``user``) and store its attribution as pending, with its event and
    the worker's task (``queue``: else the caller computes it, as a benchmark does). Returns the attribution
    and whether it is new: the same inputs (the checkpoint's weights, the dataset version, the sample size
    and the seed) asked again give the one stored, pending or done."""
    rules.check_request(user)
    check_sample(sample_size=sample_size, seed=seed)
    folder, sha256 = _inputs(trial)
    version = trial.experiment.dataset_version
    with transaction.atomic():
        existing = _same_inputs(sha256=sha256, trial=trial, sample_size=sample_size, seed=seed)
        if existing is not None:
            return existing, False
        try:
            with transaction.atomic():
                attribution = TrialAttribution.objects.create(
                    trial=trial,
                    checkpoint=trial.checkpoint,
                    checkpoint_name=folder.name,
                    checkpoint_sha256=sha256,
                    dataset_version=version,
                    dataset_sha256=version.sha256,
                    sample_size=sample_size,
                    seed=seed,
                    created_by=user,
                )
        except IntegrityError:
            # Asked at the same moment by someone else: theirs is the one.
            existing = _same_inputs(sha256=sha256, trial=trial, sample_size=sample_size, seed=seed)
            if existing is None:
                raise
            return existing, False
        event_record(
            actor=user,
            verb=Verb.TRIAL_ATTRIBUTION_QUEUED,
            target=attribution,
            data={
                "trial": trial.pk,
                "checkpoint_name": folder.name,
                "checkpoint_sha256": sha256,
                "dataset_version": version.pk,
                "dataset_sha256": version.sha256,
                "sample_size": sample_size,
                "seed": seed,
            },
        )
        if queue:
            task_enqueue(name=ATTRIBUTE_TASK, args=[attribution.pk])
    return attribution, True


def _attributions_file(attribution: TrialAttribution, folder: Path, out: Path) -> dict[str, np.ndarray[Any, Any]]:
    trial = attribution.trial
    checkpoints.trainer_run(
        "trainer.attribute",
        [
            "--data",
            trial.experiment.shard_dir,
            "--checkpoint",
            str(folder),
            "--hparams",
            _hparams_json(trial),
            "--sample-size",
            str(attribution.sample_size),
            "--seed",
            str(attribution.seed),
            "--out",
            str(out),
        ],
        timeout=ATTRIBUTE_TIMEOUT_SECONDS,
        failure=f"trial {trial.pk}'s checkpoint {folder.name} could not be explained",
        field=FIELD,
    )
    with np.load(out, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _hparams_json(trial: Trial) -> str:
    return json.dumps(trial.hparams, sort_keys=True)


def attribution_document(attribution: TrialAttribution, summary: dict[str, Any]) -> dict[str, Any]:
    """The stored document: the summary and what it was computed from (hashed with it)."""
    trial = attribution.trial
    return {
        **summary,
        "inputs": {
            "schema": DOCUMENT_SCHEMA,
            "trial": trial.pk,
            "experiment": trial.experiment_id,
            "number": trial.number,
            "checkpoint": attribution.checkpoint_name,
            "checkpoint_sha256": attribution.checkpoint_sha256,
            "dataset_version": attribution.dataset_version_id,
            "dataset_sha256": attribution.dataset_sha256,
            "sample_size": attribution.sample_size,
            "seed": attribution.seed,
        },
    }


def attribution_compute(*, attribution_id: int) -> TrialAttribution | None:
    """Run the pending attribution's checkpoint through ``trainer.attribute``, summarise it and store the
    document with its event; a failure is stored with its reason. Idempotent: an attribution no longer
    pending is left as it is (None)."""
    attribution = (
        TrialAttribution.objects.select_related("trial__experiment__dataset_version", "created_by")
        .filter(pk=attribution_id, state=AttributionState.PENDING)
        .first()
    )
    if attribution is None:
        return None
    trial = attribution.trial
    try:
        folder, sha256 = _inputs(trial)
        if sha256 != attribution.checkpoint_sha256:
            raise UserError(
                f"trial {trial.pk}'s checkpoint {folder.name} changed since it was asked for: its weights' SHA-256 "
                f"is {sha256[:12]}…, not {attribution.checkpoint_sha256[:12]}…; ask again",
                field=FIELD,
            )
        with tempfile.TemporaryDirectory(prefix="attributions-") as scratch:
            arrays = _attributions_file(attribution, folder, Path(scratch) / "attributions.npz")
        summary = attribution_statistics.summarise(arrays, seed=attribution.seed)
        document = attribution_document(attribution, summary)
        canonical = canonical_json(document)
    except subprocess.TimeoutExpired:
        return _failed(
            attribution,
            f"the trainer ran longer than {ATTRIBUTE_TIMEOUT_SECONDS:,} s on {attribution.sample_size:,} rows; "
            "ask for a smaller sample",
        )
    except (UserError, OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        return _failed(attribution, str(exc) or type(exc).__name__)
    sha = hashlib.sha256(canonical).hexdigest()
    with transaction.atomic():
        changed = TrialAttribution.objects.filter(pk=attribution.pk, state=AttributionState.PENDING).update(
            state=AttributionState.DONE,
            canonical=canonical.decode(),
            sha256=sha,
            method=str(document.get("method", ""))[:255],
            completed_at=timezone.now(),
        )
        if changed != 1:
            return None
        attribution.refresh_from_db()
        event_record(
            actor=attribution.created_by,
            verb=Verb.TRIAL_ATTRIBUTION_COMPUTED,
            target=attribution,
            data={
                "trial": trial.pk,
                "checkpoint_sha256": attribution.checkpoint_sha256,
                "sha256": sha,
                "sample_size": int((document.get("sample") or {}).get("size") or 0),
                "completeness_holds": bool((document.get("completeness") or {}).get("holds")),
            },
        )
    logger.info("%s: summary %s", attribution, sha[:12])
    return attribution


def _failed(attribution: TrialAttribution, reason: str) -> TrialAttribution:
    with transaction.atomic():
        changed = TrialAttribution.objects.filter(pk=attribution.pk, state=AttributionState.PENDING).update(
            state=AttributionState.FAILED, error=reason, completed_at=timezone.now()
        )
        if changed == 1:
            event_record(
                actor=None, verb=Verb.TRIAL_ATTRIBUTION_FAILED, target=attribution, data={"reason": reason[:2000]}
            )
    attribution.refresh_from_db()
    logger.warning("%s failed: %s", attribution, reason)
    return attribution
