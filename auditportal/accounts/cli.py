"""What every portal management command shares: who it acts as (``cli_user``) and, through
``PortalCommand`` (defined in activity/commands.py, so that activity's own commands can use it too),
the record of who ran it at the shell (docs/governance.md, "Commands")."""

from __future__ import annotations

from django.core.management.base import CommandError
from django.db import transaction

from auditportal.accounts.models import Role, User
from auditportal.accounts.services import role_grant
from auditportal.activity.commands import PortalCommand

CLI_USERNAME = "portal-cli"

# The demo's accounts (``manage.py seed_demo``, DEBUG only), one or more per role: two committee
# members, so that the default quorum of two can decide. The demo dataset (``make_demo_dataset``)
# belongs to the demo steward when that account exists.
DEMO_USERS: tuple[tuple[str, Role], ...] = (
    ("steward", Role.DATA_STEWARD),
    ("engineer", Role.ML_ENGINEER),
    ("reviewer", Role.REVIEWER),
    ("committee", Role.ETHICS_COMMITTEE),
    ("committee2", Role.ETHICS_COMMITTEE),
    ("admin", Role.ADMIN),
)
DEMO_STEWARD = "steward"

# Roles a command must never take without naming the person who holds them: what such a role does
# (policy, roles, tokens, stewards, signing keys, accounts) must be traceable to an administrator.
PRIVILEGED_ROLES = frozenset({Role.ADMIN})

__all__ = [
    "CLI_USERNAME",
    "DEMO_STEWARD",
    "DEMO_USERS",
    "PRIVILEGED_ROLES",
    "PortalCommand",
    "cli_user",
    "demo_steward",
]


def cli_user(username: str | None, *, role: Role, flag: str = "--user") -> User:
    """The account a management command acts as: ``username`` (given with ``flag``), an active account
    that holds ``role``.

    A privileged role (administrator) must be named: the command then acts as that person, and the log
    names them beside the operating-system user. For other roles the command may act, without ``flag``,
    as the ``portal-cli`` system account (it cannot log in), which is given that role on first use and
    never the administrator's.
    """
    if username is not None:
        user = User.objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"{flag} {username!r}: no active user with that name")
        if not user.has_role(role):
            raise CommandError(f"{flag} {username!r} does not hold the {role.noun} role")
        return user
    if role in PRIVILEGED_ROLES:
        raise CommandError(
            f"{flag} is required: name the {role.noun} acting (an active account holding the role); "
            "administrators' commands are never run as a system account"
        )
    with transaction.atomic():
        user, created = User.objects.get_or_create(username=CLI_USERNAME, defaults={"first_name": "Command line"})
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        held = PRIVILEGED_ROLES & {Role(role) for role in user.roles}
        if held:
            # Granted by an earlier version of this function; it would act unnamed with them.
            raise CommandError(
                f"the {CLI_USERNAME} account holds the {', '.join(sorted(r.noun for r in held))} role, "
                f"which a system account must not: revoke it (`manage.py grant_role {CLI_USERNAME} admin --revoke "
                "--by ADMIN`), or name the acting user with " + flag
            )
        if not user.has_role(role):
            role_grant(user=user, role=role, granted_by=None)
    return user


def demo_steward() -> User | None:
    """The demo's data steward (seed_demo's ``steward``), if that account exists, is active and still
    holds the role: the demo dataset is registered as them, not as the system account."""
    user = User.objects.filter(username=DEMO_STEWARD, is_active=True).first()
    return user if user is not None and user.has_role(Role.DATA_STEWARD) else None
