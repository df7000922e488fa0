from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import Role
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import selectors, services
from auditportal.experiments.configs import SLOTS_PER_TRIAL_MAX, SLOTS_PER_TRIAL_MIN, TEMPLATES
from auditportal.experiments.models import Experiment, TrialState
from auditportal.fairness.errors import UserError
from auditportal.lib.jsonlimits import JSONInputError, json_loads


class Command(PortalCommand):
    help = (
        "Launch an experiment on a dataset version (queued for the Celery worker) and print its id as the "
        "last line; with --wait, block until it ends and exit 0 only when every trial completed. With "
        "--print-config, print the Determined experiment config it would submit (YAML) and launch nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", type=int, required=True, help="dataset version id")
        parser.add_argument("--template", choices=TEMPLATES, required=True)
        parser.add_argument("--hparams", help="JSON object of values or Determined ranges (overrides the template)")
        parser.add_argument("--max-trials", type=int, help="number of trials of a search (default 4)")
        parser.add_argument("--batches", type=int, default=200, help="training length in batches (default 200)")
        parser.add_argument("--name", default="", help="experiment name (default: <dataset>-v<n>-<template>-<id>)")
        parser.add_argument(
            "--print-config",
            action="store_true",
            help="print the Determined experiment config (YAML) after the launch checks, and launch nothing",
        )
        parser.add_argument(
            "--slots-per-trial",
            type=int,
            default=1,
            help=f"processes per trial, {SLOTS_PER_TRIAL_MIN} to {SLOTS_PER_TRIAL_MAX} (default 1)",
        )
        parser.add_argument(
            "--max-concurrent-trials",
            type=int,
            default=None,
            help=(
                "trials of a search training at once (Determined's max_concurrent_trials; 0: the searcher's "
                "default; default: EXPERIMENT_LOCAL_CONCURRENCY / slots per trial locally, 0 on a cluster)"
            ),
        )
        parser.add_argument("--wait", action="store_true", help="block until the experiment ends")
        parser.add_argument("--timeout", type=float, default=0, help="with --wait: give up after this many seconds")
        parser.add_argument("--format", choices=["text", "json"], default="text")
        parser.add_argument("--user", help="act as this user (needs the ML engineer role)")

    def handle(self, *args: Any, **options: Any) -> None:
        version = DatasetVersion.objects.filter(pk=options["dataset"]).first()
        if version is None:
            raise CommandError(f"--dataset {options['dataset']}: no such dataset version")
        hparams: Any = None
        if options["hparams"]:
            try:
                hparams = json_loads(options["hparams"], field="--hparams")
            except JSONInputError as exc:
                raise CommandError(exc.message) from None
        if options["print_config"]:
            # Needs neither a master nor a user: it writes nothing and submits nothing.
            try:
                text = services.experiment_config_preview(
                    dataset_version=version,
                    template=options["template"],
                    hparams=hparams,
                    max_trials=options["max_trials"],
                    batches=options["batches"],
                    slots_per_trial=options["slots_per_trial"],
                    max_concurrent_trials=options["max_concurrent_trials"],
                    name=options["name"],
                )
            except UserError as exc:
                raise _option_error(exc) from None
            self.stdout.write(text, ending="")
            if not options["name"].strip():
                self.stderr.write(
                    "The portal adds -<experiment id> to the default name when it creates the experiment."
                )
            return
        user = cli_user(options["user"], role=Role.ML_ENGINEER)
        try:
            experiment = services.experiment_create(
                user=user,
                dataset_version=version,
                template=options["template"],
                hparams=hparams,
                max_trials=options["max_trials"],
                batches=options["batches"],
                name=options["name"],
                slots_per_trial=options["slots_per_trial"],
                max_concurrent_trials=options["max_concurrent_trials"],
            )
        except UserError as exc:
            raise _option_error(exc) from None
        if not options["wait"]:
            if options["format"] == "json":
                self.stdout.write(json.dumps(_summary(experiment)))
            else:
                self.stdout.write(f"Queued {experiment.name}")
                self.stdout.write(str(experiment.pk))
            return
        deadline = time.monotonic() + options["timeout"] if options["timeout"] else None
        while True:
            experiment.refresh_from_db()
            if not experiment.is_active:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise CommandError(f"experiment {experiment.pk} still {experiment.status} after {options['timeout']}s")
            time.sleep(1)
        summary = _summary(experiment)
        if options["format"] == "json":
            self.stdout.write(json.dumps(summary))
        else:
            self.stdout.write(f"{experiment.name}: {experiment.get_status_display()}")
            if experiment.error:
                self.stdout.write(experiment.error)
            for trial in summary["trials"]:
                metrics = ", ".join(f"{k}={v:.4f}" for k, v in trial["metrics"].items() if v is not None)
                self.stdout.write(f"  trial {trial['id']}: {trial['state']} at {trial['steps']} batches; {metrics}")
            self.stdout.write(str(experiment.pk))
        trials = summary["trials"]
        if not trials or any(trial["state"] != TrialState.COMPLETED for trial in trials):
            raise SystemExit(1)


def _option_error(exc: UserError) -> CommandError:
    # The form's and the API's dataset_version is this command's --dataset.
    name = "dataset" if exc.field == "dataset_version" else exc.field
    option = f"--{name.replace('_', '-')}: " if name else ""
    return CommandError(f"{option}{exc}")


def _summary(experiment: Experiment) -> dict[str, Any]:
    return {
        "experiment": experiment.pk,
        "status": experiment.status,
        "error": experiment.error,
        "trials": [
            {
                "id": trial.pk,
                "state": trial.state,
                "steps": trial.steps_done,
                "hparams": trial.hparams,
                "metrics": {
                    "eod": trial.latest_eod,
                    "fair_objective": trial.latest_fair_objective,
                    "accuracy": trial.latest_accuracy,
                },
            }
            for trial in selectors.trial_list(experiment=experiment)
        ],
    }
