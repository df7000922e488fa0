from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event
from auditportal.policies.selectors import policy_active


@pytest.mark.django_db
def test_it_refuses_to_run_with_debug_off(settings: SettingsWrapper) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError, match="refuses to run with DEBUG off"):
        call_command("seed_demo")
    assert not User.objects.exists()


@pytest.mark.django_db
def test_it_creates_one_user_per_role_and_prints_working_passwords(settings: SettingsWrapper) -> None:
    settings.DEBUG = True
    out = StringIO()
    call_command("seed_demo", stdout=out)
    lines = [line.split() for line in out.getvalue().splitlines()[1:]]
    assert {line[0] for line in lines} == {"steward", "engineer", "reviewer", "committee", "committee2", "admin"}
    for username, password, *_ in lines:
        user = User.objects.get(username=username)
        assert user.check_password(password)
    assert User.objects.get(username="steward").roles == {Role.DATA_STEWARD.value}
    admin = User.objects.get(username="admin")
    assert admin.is_superuser  # for the Django admin
    assert admin.is_staff
    assert admin.roles == {Role.ADMIN.value}  # granted, like everyone's; superuser brings no role
    assert not admin.has_role(Role.REVIEWER)
    assert Event.objects.filter(verb="role.granted").count() == 6


@pytest.mark.django_db
def test_it_seeds_two_committee_members_so_the_default_quorum_can_decide(settings: SettingsWrapper) -> None:
    settings.DEBUG = True
    out = StringIO()
    call_command("seed_demo", stdout=out)
    committee = User.objects.filter(role_grants__role=Role.ETHICS_COMMITTEE, is_active=True)
    assert sorted(committee.values_list("username", flat=True)) == ["committee", "committee2"]
    assert policy_active().approval_quorum <= committee.count()
    printed = {line.split()[0]: line for line in out.getvalue().splitlines()[1:]}
    assert printed["committee2"].endswith("Ethics-committee member")
    assert User.objects.get(username="committee2").check_password(printed["committee2"].split()[1])


@pytest.mark.django_db
def test_running_it_again_resets_passwords_without_duplicating_users(settings: SettingsWrapper) -> None:
    settings.DEBUG = True
    call_command("seed_demo", "--password", "first-password-123", stdout=StringIO())
    call_command("seed_demo", "--password", "second-password-456", stdout=StringIO())
    assert User.objects.count() == 6
    assert User.objects.get(username="reviewer").check_password("second-password-456")
