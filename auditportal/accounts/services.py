"""Writes of the accounts app: users and their roles, and machine accounts' API tokens (docs/approvals.md,
"API tokens"). Every write records its activity event in the same transaction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from knox.models import get_digest_token
from knox.settings import CONSTANTS

from auditportal.accounts.models import ApiToken, Role, RoleGrant, TokenScope, User
from auditportal.accounts.reauth import PASSWORD_FAILURE_WINDOW as PASSWORD_FAILURE_WINDOW
from auditportal.accounts.reauth import PASSWORD_FAILURES_ALLOWED as PASSWORD_FAILURES_ALLOWED
from auditportal.accounts.reauth import ReauthenticationFailed as ReauthenticationFailed
from auditportal.accounts.reauth import user_reauthenticate as user_reauthenticate
from auditportal.accounts.rules import check_manage_tokens
from auditportal.accounts.signals import role_changed
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.fairness.errors import UserError
from auditportal.lib.lengths import fit_column


class TokenError(UserError):
    """Something about a token to make or revoke that the administrator must fix; ``field`` names it."""


@transaction.atomic
def user_create(
    *,
    username: str,
    password: str,
    email: str = "",
    roles: Iterable[Role] = (),
    created_by: User | None = None,
) -> User:
    user = User.objects.create_user(username=username, email=email, password=password)
    event_record(actor=created_by, verb=Verb.USER_CREATED, target=user, data={"username": username})
    for role in roles:
        role_grant(user=user, role=role, granted_by=created_by)
    return user


@transaction.atomic
def role_grant(*, user: User, role: Role, granted_by: User | None) -> RoleGrant:
    grant, created = RoleGrant.objects.get_or_create(user=user, role=role, defaults={"granted_by": granted_by})
    if created:
        event_record(actor=granted_by, verb=Verb.ROLE_GRANTED, target=user, data={"role": role.value})
    user.forget_roles()
    if created:
        role_changed.send(sender=User, user=user, role=Role(role), change="granted", by=granted_by)
    return grant


@transaction.atomic
def role_revoke(*, user: User, role: Role, revoked_by: User | None) -> bool:
    deleted, _ = RoleGrant.objects.filter(user=user, role=role).delete()
    if deleted:
        event_record(actor=revoked_by, verb=Verb.ROLE_REVOKED, target=user, data={"role": role.value})
    user.forget_roles()
    if deleted:
        role_changed.send(sender=User, user=user, role=Role(role), change="revoked", by=revoked_by)
    return bool(deleted)


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    # Shown once; only its hash is stored.
    secret: str


def api_token_create(
    *, user: User, account: str, name: str, days: int, scope: TokenScope | str = TokenScope.GATE
) -> IssuedToken:
    """A token of ``scope`` for the machine account ``account`` (made if it does not exist, with no
    password, so it cannot log in), valid for ``days`` days. Administrators only.

    A gate token's account holds no role, so the token opens the gate and nothing else. An API token
    acts on /api/v1/ with its account's roles, which an administrator grants (``manage.py grant_role``)
    like a person's; the account still has no password, so it never has a browser session.
    """
    check_manage_tokens(user)
    if scope not in TokenScope.values:
        raise TokenError(f"Unknown token scope {scope!r}; choose one of {', '.join(TokenScope.values)}.", field="scope")
    scope = TokenScope(scope)
    name = fit_column(ApiToken, "name", _required(name, "name"))
    account = fit_column(User, "username", _required(account, "account"), field="account")
    if not 1 <= days <= settings.API_TOKEN_MAX_DAYS:
        raise TokenError(f"A token is valid for 1 to {settings.API_TOKEN_MAX_DAYS} days, not {days}.", field="days")
    with transaction.atomic():
        machine = User.objects.filter(username=account).first()
        if machine is None:
            machine = User.objects.create_user(username=account, first_name="Machine account")
            machine.set_unusable_password()
            machine.save(update_fields=["password"])
            event_record(
                actor=user, verb=Verb.USER_CREATED, target=machine, data={"username": account, "machine": True}
            )
        elif machine.has_usable_password() or machine.is_staff:
            raise TokenError(
                f"{account!r} is a person's account (it has a password or staff access): tokens are for "
                "machine accounts. Choose another name.",
                field="account",
            )
        elif scope == TokenScope.GATE and machine.is_member:
            raise TokenError(
                f"{account!r} holds a role: a gate token's account must hold none, so that the token opens "
                "the gate and nothing else. Choose another name, or make an API token (scope 'api').",
                field="account",
            )
        digest, secret = get_digest_token()
        token = ApiToken.objects.create(
            digest=digest,
            token_key=secret[: CONSTANTS.TOKEN_KEY_LENGTH],
            user=machine,
            expiry=timezone.now() + timedelta(days=days),
            name=name,
            scope=scope,
            created_by=user,
        )
        event_record(
            actor=user,
            verb=Verb.API_TOKEN_CREATED,
            target=token,
            data={
                "account": account,
                "name": name,
                "scope": token.scope,
                "token_key": token.token_key,
                "expiry": token.expiry.isoformat(),
            },
        )
    return IssuedToken(token=token, secret=secret)


def api_token_revoke(*, user: User, token: ApiToken) -> ApiToken:
    """Refuse ``token`` from now on (administrators only); the row stays, with who revoked it and when."""
    check_manage_tokens(user)
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().get(pk=token.pk)
        if token.revoked_at is not None:
            raise TokenError(f"API token #{token.pk} was already revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC.")
        token.revoked_at = timezone.now()
        token.revoked_by = user
        token.save(update_fields=["revoked_at", "revoked_by"])
        event_record(
            actor=user,
            verb=Verb.API_TOKEN_REVOKED,
            target=token,
            data={"account": token.user.username, "name": token.name, "token_key": token.token_key},
        )
    return token


def _required(value: str, field: str) -> str:
    value = (value or "").strip()
    if not value:
        raise TokenError(f"The {field.replace('_', ' ')} is required.", field=field)
    return value
