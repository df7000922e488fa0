"""Dataset stewards from the command line (manage.py dataset_stewards) and the migration that makes
each existing dataset's creator its first steward."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.datasets.models import DatasetSteward, DatasetVersion
from tests.factories import DatasetVersionFactory, make_user
from tests.migrating import migrate, migrate_to_latest


@pytest.fixture
def version(alice: User, dataset_storage: Path) -> DatasetVersion:
    return DatasetVersionFactory.create(created_by=alice, name="loans")


@pytest.fixture
def sam(db: None) -> User:
    return make_user("sam", [Role.DATA_STEWARD])


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("dataset_stewards", *args, stdout=out)
    return out.getvalue()


def stewards(version: DatasetVersion) -> list[str]:
    return list(DatasetSteward.objects.filter(dataset=version.dataset).values_list("user__username", flat=True))


def test_it_lists_the_stewards(version: DatasetVersion) -> None:
    [line] = run("loans").splitlines()
    assert line.startswith("alice\tsince ")
    assert line.endswith(" by alice")
    assert run("loans", "--list") == run(str(version.dataset_id))


def test_an_administrator_adds_and_removes_a_steward_with_events(
    version: DatasetVersion, sam: User, erin: User
) -> None:
    assert run("loans", "--add", "sam", "--by", "erin") == "sam is now a steward of 'loans' (by erin).\n"
    assert stewards(version) == ["alice", "sam"]
    assert run("loans", "--remove", "alice", "--by", "erin") == "alice is no longer a steward of 'loans' (by erin).\n"
    assert stewards(version) == ["sam"]
    added = Event.objects.get(verb=Verb.DATASET_STEWARD_ADDED)
    removed = Event.objects.get(verb=Verb.DATASET_STEWARD_REMOVED)
    assert (added.actor_username, added.data["dataset"], added.data["steward"]) == ("erin", "loans", "sam")
    assert (removed.actor_username, removed.data["steward"]) == ("erin", "alice")
    # Run from the command line: the event names the command and the operating-system user too.
    assert removed.data["cli"]["command"] == "dataset_stewards"
    assert removed.data["cli"]["os_user"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no dataset named 'nope'"),
        (["loans", "--add", "ghost", "--by", "erin"], "no user named 'ghost'"),
        (
            ["loans", "--add", "bob", "--by", "erin"],
            "bob is not a data steward: grant the role first, then make them a steward of 'loans'.",
        ),
        (["loans", "--add", "alice", "--by", "erin"], "alice is already a steward of 'loans'."),
        (["loans", "--remove", "sam", "--by", "erin"], "sam is not a steward of 'loans'."),
        (
            ["loans", "--remove", "alice", "--by", "erin"],
            "alice is the last steward of 'loans': add another steward first.",
        ),
        (
            ["loans", "--add", "sam"],
            "--by is required: name the administrator acting (an active account holding the role); "
            "administrators' commands are never run as a system account",
        ),
        (["loans", "--add", "sam", "--by", "bob"], "--by 'bob' does not hold the administrator role"),
        (["loans", "--add", "sam", "--by", "ghost"], "--by 'ghost': no active user with that name"),
    ],
)
def test_each_refusal_is_one_clear_line_and_changes_nothing(
    version: DatasetVersion, sam: User, bob: User, erin: User, args: list[str], message: str
) -> None:
    events = Event.objects.count()
    with pytest.raises(CommandError) as caught:
        run(*args)
    assert str(caught.value) == message
    assert stewards(version) == ["alice"]
    assert Event.objects.filter(verb__in=[Verb.DATASET_STEWARD_ADDED, Verb.DATASET_STEWARD_REMOVED]).count() == 0
    assert Event.objects.count() == events


def test_add_and_remove_are_exclusive(version: DatasetVersion) -> None:
    with pytest.raises(CommandError, match="not allowed with argument"):
        run("loans", "--add", "a", "--remove", "b")


BEFORE = [("datasets", "0004_staged_upload_status_and_progress")]
AFTER = [("datasets", "0005_dataset_stewards")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_makes_each_creator_the_first_steward(dataset_storage: Path) -> None:
    alice = make_user("alice", [Role.DATA_STEWARD])
    version = DatasetVersionFactory.create(created_by=alice, name="loans")
    migrate(BEFORE)
    try:
        migrate(AFTER)
    finally:
        migrate_to_latest()
    [steward] = DatasetSteward.objects.filter(dataset=version.dataset)
    assert (steward.user, steward.added_by, steward.added_at) == (alice, alice, version.dataset.created_at)
