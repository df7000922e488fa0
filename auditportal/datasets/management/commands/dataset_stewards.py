from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import User
from auditportal.datasets import rules
from auditportal.datasets.models import Dataset, DatasetSteward
from auditportal.datasets.services import dataset_steward_add, dataset_steward_remove
from auditportal.fairness.errors import UserError


class Command(PortalCommand):
    help = (
        "List a dataset's stewards (its owners: only they or an administrator add versions and retire "
        "them), or add or remove one; each change is an event in the activity log."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", metavar="DATASET", help="the dataset's name (or its id)")
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--add", metavar="USERNAME", help="make this data steward a steward of the dataset")
        action.add_argument("--remove", metavar="USERNAME", help="take this user off the dataset's stewards")
        action.add_argument("--list", action="store_true", help="list the stewards (the default)")
        parser.add_argument(
            "--by",
            metavar="USERNAME",
            help="the administrator acting (required)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        dataset = self._dataset(options["dataset"])
        if options["add"] or options["remove"]:
            username = options["add"] or options["remove"]
            user = User.objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user named {username!r}")
            acting = cli_user(options["by"], role=rules.STEWARD_MANAGER_ROLE, flag="--by")
            try:
                if options["add"]:
                    dataset_steward_add(dataset=dataset, user=user, actor=acting)
                    self.stdout.write(f"{user.username} is now a steward of {dataset.name!r} (by {acting.username}).")
                else:
                    dataset_steward_remove(dataset=dataset, user=user, actor=acting)
                    self.stdout.write(
                        f"{user.username} is no longer a steward of {dataset.name!r} (by {acting.username})."
                    )
            except UserError as exc:
                raise CommandError(str(exc)) from exc
            return
        for steward in DatasetSteward.objects.filter(dataset=dataset).select_related("user", "added_by"):
            by = f" by {steward.added_by.username}" if steward.added_by else ""
            self.stdout.write(f"{steward.user.username}\tsince {steward.added_at:%Y-%m-%d %H:%M} UTC{by}")

    def _dataset(self, name: str) -> Dataset:
        dataset = Dataset.objects.filter(name=name).first()
        if dataset is None and name.isdigit():
            dataset = Dataset.objects.filter(pk=int(name)).first()
        if dataset is None:
            raise CommandError(f"no dataset named {name!r}")
        return dataset
