"""Creating an experiment: the launch parameters checked, the experiment stored and its launch queued
after commit; the config preview (the same checks, nothing written)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.datasets.models import DatasetVersion, IntegrityPurpose
from auditportal.datasets.services import DatasetIntegrityError, dataset_version_check_integrity
from auditportal.experiments import configs, rules
from auditportal.experiments.models import Experiment
from auditportal.experiments.services.queueing import _launch_queue
from auditportal.fairness.errors import UserError


def experiment_create(
    *,
    user: User,
    dataset_version: DatasetVersion,
    template: str,
    hparams: Mapping[str, Any] | None = None,
    max_trials: int | None = None,
    batches: int = 200,
    slots_per_trial: int = 1,
    max_concurrent_trials: int | None = None,
    backend: str | None = None,
    name: str = "",
) -> Experiment:
    """Check the launch parameters, store the experiment and queue its launch (through the outbox: it
    reaches the broker once the experiment is committed).

    Wrong parameters raise a UserError naming the field (dataset_version, template, hparams,
    max_trials, batches, slots_per_trial, max_concurrent_trials). ``max_concurrent_trials`` left out takes
    configs.default_max_concurrent_trials for the backend. A retired version, or one whose stored file fails its
    integrity check, is refused. Runs outside any transaction: the integrity check commits its own
    record.
    """
    rules.check_launch(user)
    chosen_backend = backend or settings.EXPERIMENT_BACKEND
    plan = _launch_plan(
        dataset_version=dataset_version,
        template=template,
        hparams=hparams,
        max_trials=max_trials,
        batches=batches,
        slots_per_trial=slots_per_trial,
        max_concurrent_trials=max_concurrent_trials,
        backend=chosen_backend,
    )
    try:
        dataset_version_check_integrity(version=dataset_version, actor=user, purpose=IntegrityPurpose.LAUNCH)
    except DatasetIntegrityError as exc:
        raise DatasetIntegrityError(exc.message, field="dataset_version") from None
    shard_dir = _shard_dir(dataset_version)
    with transaction.atomic():
        experiment = Experiment.objects.create(
            dataset_version=dataset_version,
            name=name.strip()[:128],
            template=template,
            hparam_space=plan.space,
            max_trials=plan.trials,
            slots_per_trial=plan.slots_per_trial,
            max_concurrent_trials=plan.max_concurrent_trials,
            batches=batches,
            validation_period=configs.validation_period(template, batches),
            backend=chosen_backend,
            shard_dir=str(shard_dir),
            launched_by=user,
            config_yaml="",
        )
        experiment.name = experiment.name or f"{_default_name(dataset_version, template)}-{experiment.pk}"
        experiment.config_yaml = _config_yaml(
            dataset_version=dataset_version, template=template, plan=plan, batches=batches, name=experiment.name
        )
        experiment.save(update_fields=["name", "config_yaml"])
        event_record(
            actor=user,
            verb=Verb.EXPERIMENT_LAUNCHED,
            target=experiment,
            data={
                "dataset_version": dataset_version.pk,
                "template": template,
                "max_trials": plan.trials,
                "batches": batches,
                "slots_per_trial": plan.slots_per_trial,
                "max_concurrent_trials": plan.max_concurrent_trials,
                "backend": chosen_backend,
            },
        )
        _launch_queue(experiment.pk)
    return experiment


def experiment_config_preview(
    *,
    dataset_version: DatasetVersion,
    template: str,
    hparams: Mapping[str, Any] | None = None,
    max_trials: int | None = None,
    batches: int = 200,
    slots_per_trial: int = 1,
    max_concurrent_trials: int | None = None,
    name: str = "",
) -> str:
    """The Determined experiment config (YAML) that ``experiment_create`` would store and a cluster
    launch would submit, after the same checks; writes nothing and needs no master.

    Without ``name`` the experiment's default name is shown without the ``-<id>`` the portal adds
    once the experiment exists.
    """
    plan = _launch_plan(
        dataset_version=dataset_version,
        template=template,
        hparams=hparams,
        max_trials=max_trials,
        batches=batches,
        slots_per_trial=slots_per_trial,
        max_concurrent_trials=max_concurrent_trials,
        backend=settings.EXPERIMENT_BACKEND,
    )
    chosen = name.strip()[:128] or _default_name(dataset_version, template)
    return _config_yaml(dataset_version=dataset_version, template=template, plan=plan, batches=batches, name=chosen)


@dataclass(frozen=True)
class _LaunchPlan:
    space: dict[str, Any]
    trials: int
    slots_per_trial: int
    max_concurrent_trials: int


def _launch_plan(
    *,
    dataset_version: DatasetVersion,
    template: str,
    hparams: Mapping[str, Any] | None,
    max_trials: int | None,
    batches: int,
    slots_per_trial: int,
    max_concurrent_trials: int | None,
    backend: str,
) -> _LaunchPlan:
    """The checked hyperparameter space and trial count; a UserError names what is wrong."""
    if dataset_version.is_retired:
        assert dataset_version.retired_at is not None
        raise UserError(
            f"Dataset version {dataset_version.dataset.name} v{dataset_version.number} was retired on "
            f"{dataset_version.retired_at:%Y-%m-%d} ({dataset_version.retired_reason}); choose another version.",
            field="dataset_version",
        )
    space = configs.space_build(template, hparams, features=_feature_counts(dataset_version))
    if template == "single":
        if max_trials not in (None, 1):
            raise UserError("A single-trial experiment runs exactly one trial.", field="max_trials")
        trials = 1
    else:
        trials = 4 if max_trials is None else max_trials
        if not 1 <= trials <= settings.EXPERIMENT_MAX_TRIALS:
            raise UserError(
                f"max_trials must be between 1 and {settings.EXPERIMENT_MAX_TRIALS}, got {trials}.", field="max_trials"
            )
    if not 1 <= batches <= settings.EXPERIMENT_MAX_BATCHES:
        raise UserError(
            f"batches must be between 1 and {settings.EXPERIMENT_MAX_BATCHES}, got {batches}.", field="batches"
        )
    if template == "asha" and batches < configs.ASHA_DIVISOR ** (configs.ASHA_MAX_RUNGS - 1):
        raise UserError("An ASHA search needs at least 16 batches (three rungs, divisor 4).", field="batches")
    configs.check_slots_per_trial(slots_per_trial, space)
    if template == "single":
        # Determined's single searcher has no such field: one trial runs.
        if max_concurrent_trials not in (None, 0, 1):
            raise UserError("A single-trial experiment runs exactly one trial.", field="max_concurrent_trials")
        concurrent = 1
    elif max_concurrent_trials is None:
        concurrent = configs.default_max_concurrent_trials(
            backend=backend, slots_per_trial=slots_per_trial, local_slots=settings.EXPERIMENT_LOCAL_CONCURRENCY
        )
    else:
        configs.check_max_concurrent_trials(max_concurrent_trials, max_trials=trials)
        concurrent = max_concurrent_trials
    return _LaunchPlan(space=space, trials=trials, slots_per_trial=slots_per_trial, max_concurrent_trials=concurrent)


def _default_name(version: DatasetVersion, template: str) -> str:
    return f"{version.dataset.name}-v{version.number}-{template}"


def _config_yaml(*, dataset_version: DatasetVersion, template: str, plan: _LaunchPlan, batches: int, name: str) -> str:
    return configs.to_yaml(
        configs.experiment_config(
            name=name,
            template=template,
            space=plan.space,
            max_trials=plan.trials,
            slots_per_trial=plan.slots_per_trial,
            max_concurrent_trials=plan.max_concurrent_trials,
            batches=batches,
            # Trial containers find the shards under the agents' view of the shard directory.
            shard_host_dir=settings.SHARD_HOST_DIR or str(settings.SHARD_DIR),
            shard_folder=_shard_dir(dataset_version).name,
            dataset_sha256=dataset_version.sha256,
            image=settings.DET_TRAINER_IMAGE,
        )
    )


def _feature_counts(version: DatasetVersion) -> tuple[int, int] | None:
    """(numeric, categorical) features the trainer will read, for the model-size check at launch."""
    kinds = [feature.get("kind") for feature in version.features or [] if isinstance(feature, dict)]
    if not kinds:
        return None
    return kinds.count("numeric"), kinds.count("categorical")


def _shard_dir(version: DatasetVersion) -> Path:
    return Path(settings.SHARD_DIR) / f"version-{version.pk}-k1-seed0"
