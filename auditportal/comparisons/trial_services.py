"""A paired comparison of two trials validated on the same dataset version (docs/comparisons.md).

The request is checked and stored as a pending comparison in the web request; a worker runs each
trial's checkpoint on the shared validation rows (``python -m trainer.predict`` in a subprocess, so
the portal never imports torch) and pairs the two row by row (fairness/statistics/paired_trials).
"""

from __future__ import annotations

import json
import logging
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Final

import numpy as np
from django.db import transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.comparisons import rules
from auditportal.comparisons.models import ComparisonSource, ComparisonState, PairedComparison
from auditportal.comparisons.services import verdict_document_freeze_paired_comparison
from auditportal.experiments import checkpoints
from auditportal.experiments.models import Trial
from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics import paired, paired_trials, stats
from auditportal.outbox.services import task_enqueue
from auditportal.policies.selectors import policy_active

logger = logging.getLogger(__name__)

COMPARE_TRIALS_TASK: Final = "comparisons.compare_trials"
TRIAL_FIELDS: Final = ("champion_trial", "challenger_trial")
# The threshold of the trainer's bias monitor: the trials' predictions are those their validations counted.
THRESHOLD: Final = 0.5
PREDICT_TIMEOUT_SECONDS: Final = 3600


_CLUSTER_INSTEAD = "compare a file of both models' predictions instead"


def _val_fraction(trial: Trial) -> float:
    return checkpoints.trial_val_fraction(trial)


def _checkpoint(trial: Trial, field: str) -> Path:
    return checkpoints.trial_checkpoint(trial, field=field, purpose="compared", instead=_CLUSTER_INSTEAD)


def _manifest(trial: Trial, field: str) -> dict[str, Any]:
    return checkpoints.trial_shards(trial, field=field)


def check_trials(*, champion: Trial, challenger: Trial) -> None:
    """Refuse, naming the field, two trials that cannot be paired on the same validation rows."""
    if champion.pk == challenger.pk:
        raise UserError(
            f"trial {challenger.pk} is also the champion; compare two different trials", field="challenger_trial"
        )
    for trial, field in ((champion, "champion_trial"), (challenger, "challenger_trial")):
        _checkpoint(trial, field)
    a, b = champion.experiment.dataset_version, challenger.experiment.dataset_version
    if a.pk != b.pk:
        raise UserError(
            f"trial {challenger.pk} was validated on dataset version {b.pk} ({b.sha256[:12]}…), trial {champion.pk} on "
            f"version {a.pk} ({a.sha256[:12]}…): paired trials must be validated on the same dataset version",
            field="challenger_trial",
        )
    fractions = (_val_fraction(champion), _val_fraction(challenger))
    if fractions[0] != fractions[1]:
        raise UserError(
            f"the trials' validation splits differ: val_fraction {fractions[0]:g} (trial {champion.pk}) and "
            f"{fractions[1]:g} (trial {challenger.pk}); a paired comparison needs the same validation rows",
            field="challenger_trial",
        )
    layouts = [
        (m.get("part_dirs"), m.get("num_examples"))
        for m in (_manifest(champion, "champion_trial"), _manifest(challenger, "challenger_trial"))
    ]
    if layouts[0] != layouts[1]:
        raise UserError(
            "the trials' shards have different layouts (parts or rows), so their validation splits differ: "
            "the split is a function of each row's part and position",
            field="challenger_trial",
        )


def _model_name(trial: Trial) -> str:
    return f"trial {trial.pk} ({trial.experiment.name} #{trial.number})"


def _trial_reference(trial: Trial) -> dict[str, Any]:
    return {
        "trial": trial.pk,
        "experiment": trial.experiment_id,
        "number": trial.number,
        "checkpoint": Path(trial.checkpoint).name,
        "hparams": trial.hparams,
    }


def comparison_request_trials(
    *, user: User, champion: Trial, challenger: Trial, power: float = stats.DEFAULT_POWER, queue: bool = True
) -> PairedComparison:
    """Check two trials (``champion`` and ``challenger``, already scoped to ``user``) and store their
    comparison as pending; ``queue``: a worker completes it (:func:`comparison_compute_trials`), else
    the caller does (the command, which waits anyway)."""
    rules.check_create(user)
    check_trials(champion=champion, challenger=challenger)
    policy = policy_active()
    paired._check_levels(tolerance=policy.tolerance, alpha=policy.alpha, power=power, metrics=paired.METRICS)
    version = champion.experiment.dataset_version
    parameters = {
        "source": ComparisonSource.TRIALS.value,
        "dataset_version": version.pk,
        "champion_trial": _trial_reference(champion),
        "challenger_trial": _trial_reference(challenger),
        "threshold": THRESHOLD,
        "val_fraction": _val_fraction(champion),
        "tolerance": policy.tolerance,
        "alpha": policy.alpha,
        "power": power,
        "metrics": list(paired.METRICS),
    }
    with transaction.atomic():
        comparison = PairedComparison.objects.create(
            created_by=user,
            original_name=version.original_name,
            file_format=version.file_format,
            sha256=version.sha256,
            size_bytes=version.size_bytes,
            num_rows=0,
            champion=_model_name(champion),
            challenger=_model_name(challenger),
            parameters=parameters,
            policy=policy,
            source=ComparisonSource.TRIALS,
            state=ComparisonState.PENDING,
            champion_trial=champion,
            challenger_trial=challenger,
        )
        event_record(
            actor=user,
            verb=Verb.PAIRED_COMPARISON_QUEUED,
            target=comparison,
            data={"champion_trial": champion.pk, "challenger_trial": challenger.pk, "sha256": version.sha256},
        )
        if queue:
            task_enqueue(name=COMPARE_TRIALS_TASK, args=[comparison.pk])
    return comparison


def _predictions(trial: Trial, folder: Path) -> dict[str, np.ndarray[Any, Any]]:
    out = folder / f"trial-{trial.pk}.npz"
    checkpoints.trainer_run(
        "trainer.predict",
        ["--data", trial.experiment.shard_dir, "--checkpoint", trial.checkpoint, "--hparams", json.dumps(trial.hparams),
         "--out", str(out)],
        timeout=PREDICT_TIMEOUT_SECONDS,
        failure=f"trial {trial.pk}'s checkpoint could not be run",
        field="champion_trial",
    )  # fmt: skip
    with np.load(out, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def comparison_compute_trials(*, comparison_id: int) -> PairedComparison | None:
    """Run both trials' checkpoints on their validation rows, pair them and store the result with its
    verdict document; a comparison that cannot be paired is marked failed with the reason. Idempotent:
    a comparison no longer pending is left as it is (None)."""
    comparison = (
        PairedComparison.objects.select_related(
            "champion_trial__experiment__dataset_version", "challenger_trial__experiment", "policy"
        )
        .filter(pk=comparison_id, state=ComparisonState.PENDING)
        .first()
    )
    if comparison is None:
        return None
    champion, challenger = comparison.champion_trial, comparison.challenger_trial
    assert champion is not None
    assert challenger is not None
    assert comparison.policy is not None
    policy = comparison.policy
    try:
        check_trials(champion=champion, challenger=challenger)
        with tempfile.TemporaryDirectory(prefix="paired-trials-") as folder:
            sides = [_predictions(trial, Path(folder)) for trial in (champion, challenger)]
        result = paired_trials.compare_trials(
            sides[0],
            sides[1],
            tolerance=policy.tolerance,
            alpha=policy.alpha,
            power=float(comparison.parameters.get("power", stats.DEFAULT_POWER)),
        )
    except (UserError, subprocess.TimeoutExpired, OSError) as exc:
        return _failed(comparison, str(exc))
    version = champion.experiment.dataset_version
    positives = result.pop("positives")
    document = {
        **result,
        "file": {
            "name": version.original_name,
            "format": version.file_format,
            "sha256": version.sha256,
            "size_bytes": version.size_bytes,
        },
        "label": {"column": version.label_column, "positive": version.positive_value, "positives": positives},
        "champion": {"column": comparison.champion, "threshold": THRESHOLD, **comparison.parameters["champion_trial"]},
        "challenger": {
            "column": comparison.challenger,
            "threshold": THRESHOLD,
            **comparison.parameters["challenger_trial"],
        },
        "output": "prediction",
        "source": ComparisonSource.TRIALS.value,
        "dataset_version": {
            "id": version.pk,
            "sha256": version.sha256,
            "val_fraction": comparison.parameters["val_fraction"],
        },
        "policy": policy.as_document(),
    }
    with transaction.atomic():
        locked = PairedComparison.objects.select_for_update().filter(pk=comparison.pk, state=ComparisonState.PENDING)
        if not locked.exists():
            return None
        comparison.num_rows = result["rows"]
        comparison.result = document
        comparison.verdict = document["verdict"] or ""
        comparison.state = ComparisonState.DONE
        comparison.save(update_fields=["num_rows", "result", "verdict", "state"])
        event_record(
            actor=comparison.created_by,
            verb=Verb.PAIRED_COMPARISON_CREATED,
            target=comparison,
            data={
                "champion_trial": champion.pk,
                "challenger_trial": challenger.pk,
                "sha256": version.sha256,
                "rows": comparison.num_rows,
                "verdict": document["verdict"],
                "policy": policy.version,
            },
        )
        verdict_document_freeze_paired_comparison(comparison=comparison)
    logger.info("%s: %d validation rows, verdict %s", comparison, comparison.num_rows, comparison.verdict or "none")
    return comparison


def _failed(comparison: PairedComparison, reason: str) -> PairedComparison:
    with transaction.atomic():
        changed = PairedComparison.objects.filter(pk=comparison.pk, state=ComparisonState.PENDING).update(
            state=ComparisonState.FAILED, error=reason
        )
        if changed == 1:
            event_record(actor=None, verb=Verb.PAIRED_COMPARISON_FAILED, target=comparison, data={"reason": reason})
    comparison.refresh_from_db()
    logger.warning("%s failed: %s", comparison, reason)
    return comparison
