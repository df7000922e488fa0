"""A completed trial's checkpoint, checked before the portal runs it, and the trainer's commands that run it.

Comparisons (two trials' predictions on their shared validation rows) and attributions (why a trial's
model has its gaps) both run a trial's checkpoint in a subprocess of the trainer
(``python -m trainer.predict``, ``python -m trainer.attribute``), so the portal never imports torch.
Both refuse the same trials, with the same words, naming the request's field: one still running or
not completed, one without a checkpoint, one whose checkpoint is no longer on disk (for a trial on a
Determined cluster: not in the cluster's checkpoint storage the portal mounts, ``DET_CHECKPOINT_DIR``),
one whose checkpoint or shards come from other data than its experiment's dataset version.

What a local trial's folder records of its data (backends/local.py, ``run.json``): the dataset
version and its SHA-256 the trial was started on. A checkpoint in a folder that says another version
(a run folder left from an earlier database, a checkpoint copied in) is refused; so is one whose
``bias_stats.json`` counted groups its shards do not have.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from django.conf import settings

from auditportal.experiments.models import Backend, Trial, TrialState
from auditportal.fairness.errors import UserError

# The file a trial's run folder keeps of what it was started on (written by the local backend).
RUN_RECORD: Final = "run.json"
STATE_DICT: Final = "state_dict.pth"


def trial_checkpoint(trial: Trial, *, field: str, purpose: str, instead: str) -> Path:
    """The folder of ``trial``'s checkpoint, or a ``UserError`` naming ``field`` that says why it cannot be run.

    ``purpose`` ends the sentence "only a completed trial's checkpoint is ..." ("compared", "explained");
    ``instead`` says what to do about a trial on a Determined cluster."""
    name = f"trial {trial.pk}"
    if trial.state != TrialState.COMPLETED:
        raise UserError(
            f"{name} is {trial.state.lower()}: only a completed trial's checkpoint is {purpose}", field=field
        )
    if not trial.checkpoint:
        raise UserError(f"{name} has no checkpoint to {_verb(purpose)}", field=field)
    if trial.experiment.backend != Backend.LOCAL:
        return _cluster_checkpoint(trial, field=field, instead=instead)
    folder = Path(trial.checkpoint).resolve()
    if not folder.is_relative_to(Path(settings.EXPERIMENT_RUN_DIR).resolve()) or not (folder / STATE_DICT).is_file():
        raise UserError(f"{name}'s checkpoint {folder.name} is no longer on disk", field=field)
    _check_run_record(trial, folder, field=field)
    return folder


def _cluster_checkpoint(trial: Trial, *, field: str, instead: str) -> Path:
    """A cluster trial's checkpoint: the folder named by its UUID in the cluster's shared_fs checkpoint
    storage, mounted read-only where ``DET_CHECKPOINT_DIR`` says (Determined writes a checkpoint there as
    ``<host_path>/<uuid>/``). Without the setting the portal cannot read it and says so."""
    name = f"trial {trial.pk}"
    root = settings.DET_CHECKPOINT_DIR
    if not root:
        raise UserError(
            f"{name} ran on a Determined cluster: its checkpoint is in the cluster's storage, which this portal "
            f"does not mount (DET_CHECKPOINT_DIR is not set; docs/determined-cluster.md); {instead}",
            field=field,
        )
    base = Path(root).resolve()
    folder = (base / trial.checkpoint).resolve()
    if folder.parent != base:
        raise UserError(f"{name}'s checkpoint {trial.checkpoint!r} is not a checkpoint UUID", field=field)
    if not (folder / STATE_DICT).is_file():
        raise UserError(
            f"{name}'s checkpoint {trial.checkpoint} is not in the cluster's checkpoint storage at {root} "
            f"(no {STATE_DICT}: deleted by the experiment's checkpoint policy, or the storage is not shared_fs)",
            field=field,
        )
    return folder


def _verb(purpose: str) -> str:
    # "compared" -> "compare", "explained" -> "explain"
    return purpose.removesuffix("d") if purpose.endswith("ed") else purpose


def run_folder(checkpoint: Path) -> Path | None:
    """The trial's run folder a local checkpoint lies in (``<run>/xdg/determined/<uuid>``), or None."""
    if checkpoint.parent.name == "determined" and checkpoint.parent.parent.name == "xdg":
        return checkpoint.parent.parent.parent
    return None


def _check_run_record(trial: Trial, folder: Path, *, field: str) -> None:
    version = trial.experiment.dataset_version
    run = run_folder(folder)
    record = _read_json(run / RUN_RECORD) if run is not None else None
    recorded = (record or {}).get("dataset_version")
    if isinstance(recorded, dict) and recorded.get("sha256") != version.sha256:
        raise UserError(
            f"trial {trial.pk}'s checkpoint {folder.name} was trained on dataset version {recorded.get('id')} "
            f"({str(recorded.get('sha256'))[:12]}…), but the trial's experiment is on dataset version {version.pk} "
            f"({version.sha256[:12]}…): the checkpoint's run folder ({RUN_RECORD}) is another run's",
            field=field,
        )


def trial_shards(trial: Trial, *, field: str, checkpoint: Path | None = None) -> dict[str, Any]:
    """The manifest of ``trial``'s shards (docs/shard-format.md), refused when the shards are gone or were
    written from other data than the experiment's dataset version, or when ``checkpoint``'s counts
    (``bias_stats.json``) name groups these shards do not have (a checkpoint of other data)."""
    path = Path(trial.experiment.shard_dir) / "manifest.json"
    manifest = _read_json(path)
    if manifest is None:
        raise UserError(f"trial {trial.pk}'s shards are no longer on disk", field=field)
    dataset = manifest.get("dataset")
    if not isinstance(dataset, dict) or dataset.get("sha256") != trial.experiment.dataset_version.sha256:
        raise UserError(
            f"trial {trial.pk}'s shards were rewritten from other data than its dataset version", field=field
        )
    if checkpoint is not None:
        _check_checkpoint_groups(trial, checkpoint, manifest, field=field)
    return manifest


def _check_checkpoint_groups(trial: Trial, checkpoint: Path, manifest: dict[str, Any], *, field: str) -> None:
    stats = _read_json(checkpoint / "bias_stats.json")
    counted = (stats or {}).get("attributes")
    if not isinstance(counted, dict):
        return  # a checkpoint written before the trainer kept its counts: nothing to hold it to
    declared = {
        str(attribute.get("name")): {str(group) for group in attribute.get("groups") or []}
        for attribute in manifest.get("attributes") or []
        if isinstance(attribute, dict)
    }
    for name, entry in counted.items():
        if "&" in name:
            continue  # an intersection: its groups are pairs of the attributes' groups
        name = name.replace("%26", "&").replace("%25", "%")  # trainer.bias.stats_key's escapes
        groups = set((entry or {}).get("groups") or {}) if isinstance(entry, dict) else set()
        if name not in declared or not groups <= declared[name]:
            raise UserError(
                f"trial {trial.pk}'s checkpoint {checkpoint.name} counted attribute {name!r} with groups "
                f"{', '.join(sorted(groups)) or 'none'}, which the experiment's dataset version "
                f"{trial.experiment.dataset_version_id} does not have: the checkpoint is from another dataset version",
                field=field,
            )


def trial_val_fraction(trial: Trial) -> float:
    from trainer.hparams import resolve_hparams

    return float(resolve_hparams(trial.hparams)["val_fraction"])


def checkpoint_sha256(checkpoint: Path) -> str:
    """The SHA-256 of the checkpoint's weights (``state_dict.pth``): what identifies the model run."""
    digest = hashlib.sha256()
    with (checkpoint / STATE_DICT).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def trainer_run(module: str, arguments: Sequence[str], *, timeout: float, failure: str, field: str) -> None:
    """Run ``python -m <module> <arguments>`` of the trainer (settings.EXPERIMENT_TRAINER_PYTHON) with the
    repository on its path and one thread (small models run faster so, measured on 2 cores); a non-zero
    exit is a ``UserError`` naming ``field``: ``failure`` and the last line the trainer wrote to stderr.
    ``subprocess.TimeoutExpired`` and ``OSError`` are the caller's."""
    command = [settings.EXPERIMENT_TRAINER_PYTHON, "-m", module, *arguments]
    env = {
        **os.environ,
        "PYTHONPATH": str(settings.BASE_DIR),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise UserError(f"{failure}: {tail}", field=field)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
