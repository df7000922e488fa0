"""Writes of the accounts app: users, their passwords and roles, and machine accounts' API tokens
(docs/approvals.md, "API tokens"; docs/governance.md, "Accounts and passwords"). Every write records its
activity event in the same transaction.

No one sets another person's password: an account is made without one, and its owner sets it from a
one-time link mailed to them (``user_create``, ``user_password_reset_force``); an administrator can
only take a password away and have the link sent. So a committee member's vote, which re-checks their
password, is theirs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, models, transaction
from django.utils import timezone
from django.utils.encoding import force_str
from django.utils.http import urlsafe_base64_decode
from knox.models import get_digest_token
from knox.settings import CONSTANTS

from auditportal.accounts.models import (
    ApiToken,
    Role,
    RoleGrant,
    RoleGrantProposal,
    RoleGrantProposalClosure,
    RoleProposalOutcome,
    TokenScope,
    User,
)
from auditportal.accounts.reauth import PASSWORD_FAILURE_WINDOW as PASSWORD_FAILURE_WINDOW
from auditportal.accounts.reauth import PASSWORD_FAILURES_ALLOWED as PASSWORD_FAILURES_ALLOWED
from auditportal.accounts.reauth import ReauthenticationFailed as ReauthenticationFailed
from auditportal.accounts.reauth import user_reauthenticate as user_reauthenticate
from auditportal.accounts.rules import (
    check_confirm_role_proposal,
    check_manage_roles,
    check_manage_tokens,
    check_manage_users,
    check_withdraw_role_proposal,
    needs_second_administrator,
)
from auditportal.accounts.signals import role_changed
from auditportal.activity.models import Event, Verb
from auditportal.activity.services import event_record
from auditportal.fairness.errors import UserError
from auditportal.lib.lengths import fit_column
from auditportal.outbox.services import task_enqueue

# The Celery task (accounts/tasks.py) that mails a member the one-time link to set their password.
MAIL_ACCOUNT_LINK_TASK = "accounts.mail_password_link"


class TokenError(UserError):
    """Something about a token to make or revoke that the administrator must fix; ``field`` names it."""


class AccountError(UserError):
    """Something about an account or a password that must be fixed; ``field`` names it."""


@transaction.atomic
def user_create(
    *,
    username: str,
    email: str,
    created_by: User,
    first_name: str = "",
    last_name: str = "",
    roles: Iterable[Role] = (),
) -> User:
    """A person's account (administrators only), without a password: its owner sets one from the link
    mailed to ``email`` once this commits. The administrator never knows it. A role that decides is
    only proposed (role_grant_propose): a different administrator confirms it."""
    check_manage_users(created_by, action="create accounts")
    username = _username(username)
    email = _email(email)
    user = User(username=username, email=email, first_name=first_name, last_name=last_name)
    user.set_unusable_password()
    user.save()
    event_record(actor=created_by, verb=Verb.USER_CREATED, target=user, data={"username": username, "email": email})
    for role in roles:
        role_grant_propose(user=user, role=role, by=created_by)
    _password_link_send(user=user, reason="new account")
    return user


@transaction.atomic
def user_bootstrap_create(*, username: str, email: str, password: str) -> User:
    """The portal's first administrator (``manage.py createsuperuser``), with the password they typed
    themselves: only while no active administrator or superuser exists, so it cannot make a second
    identity for someone who already administers the portal."""
    if administrators_exist():
        raise AccountError(
            "An administrator already exists: accounts are created by an administrator "
            "(`manage.py account create --user ADMIN`), and their owners set their passwords.",
            field="username",
        )
    username = _username(username)
    user = User(username=username, email=_email(email, required=False), is_staff=True, is_superuser=True)
    _validated(password, user)
    user.set_password(password)
    user.save()
    event_record(actor=None, verb=Verb.USER_CREATED, target=user, data={"username": username, "bootstrap": True})
    role_grant(user=user, role=Role.ADMIN, granted_by=None)
    return user


def administrators_exist(*, superusers: bool = True) -> bool:
    """Whether any active account holds the administrator role (or, with ``superusers``, is a superuser)."""
    admins = models.Q(role_grants__role=Role.ADMIN)
    if superusers:
        admins |= models.Q(is_superuser=True)
    return User.objects.filter(admins, is_active=True).exists()


@transaction.atomic
def user_demo_create(*, username: str, password: str, role: Role) -> User:
    """A demo account with a known password (``manage.py seed_demo``): development only (DEBUG), the
    one place a password is set by someone other than its owner, and the event says so."""
    if not settings.DEBUG:
        raise AccountError("Demo accounts are made only with DEBUG on; they do not belong in production.")
    user = User.objects.filter(username=username).first()
    if user is None:
        user = User.objects.create(username=username)
        event_record(actor=None, verb=Verb.USER_CREATED, target=user, data={"username": username, "demo": True})
    user.set_password(password)
    user.save(update_fields=["password"])
    event_record(actor=None, verb=Verb.USER_PASSWORD_CHANGED, target=user, data={"how": "demo seed"})
    role_grant(user=user, role=role, granted_by=None)
    return user


def user_password_change(*, user: User, old_password: str, new_password: str) -> User:
    """``user`` changes their own password, proving they know the current one."""
    if not user.has_usable_password() or not user.check_password(old_password or ""):
        raise AccountError("The current password is not right.", field="old_password")
    _validated(new_password, user)
    with transaction.atomic():
        user.set_password(new_password)
        user.save(update_fields=["password"])
        event_record(actor=user, verb=Verb.USER_PASSWORD_CHANGED, target=user, data={"how": "current password"})
    return user


def user_password_reset_force(*, user: User, reset_by: User) -> User:
    """An administrator takes ``user``'s password away (their sessions end with it: a session holds a
    hash of the password) and has a one-time link mailed to them to set a new one. The administrator
    neither sets nor learns the new password."""
    check_manage_users(reset_by, action="force a password reset")
    if not user.email:
        raise AccountError(
            f"{user.username} has no e-mail address to send the link to; they set it themselves, or a new "
            "account is made for them.",
            field="email",
        )
    with transaction.atomic():
        user = User.objects.select_for_update().get(pk=user.pk)
        user.set_unusable_password()
        user.save(update_fields=["password"])
        event_record(actor=reset_by, verb=Verb.USER_PASSWORD_RESET_FORCED, target=user, data={"email": user.email})
        _password_link_send(user=user, reason="reset")
    return user


def password_link_user(*, uidb64: str, token: str) -> User | None:
    """The account a password link is for, if the link is still good (not used, not expired)."""
    try:
        pk = int(force_str(urlsafe_base64_decode(uidb64)))
    except (TypeError, ValueError, OverflowError):
        return None
    user = User.objects.filter(pk=pk, is_active=True).first()
    if user is None or not default_token_generator.check_token(user, token):
        return None
    return user


def user_password_set_from_link(*, uidb64: str, token: str, new_password: str) -> User:
    """The owner sets their password from the one-time link; the link stops working once it is used
    (the token covers the password it replaces) or after PASSWORD_LINK_HOURS."""
    user = password_link_user(uidb64=uidb64, token=token)
    if user is None:
        raise AccountError(
            "This link has expired or was already used. Ask an administrator for a new one.", field="token"
        )
    _validated(new_password, user)
    with transaction.atomic():
        # Checked again under the row's lock: of two uses of one link at once, the second finds it spent.
        user = User.objects.select_for_update().get(pk=user.pk)
        if not default_token_generator.check_token(user, token):
            raise AccountError("This link was already used. Ask an administrator for a new one.", field="token")
        user.set_password(new_password)
        user.save(update_fields=["password"])
        event_record(actor=user, verb=Verb.USER_PASSWORD_CHANGED, target=user, data={"how": "password link"})
    return user


def user_activate(*, user: User, by: User) -> bool:
    """Let ``user`` log in again; whether anything changed."""
    return _active_set(user=user, by=by, active=True)


def user_deactivate(*, user: User, by: User) -> bool:
    """``user`` can no longer log in, and their sessions and votes stop at the next request; the account
    and everything it did stay (accounts are never deleted). Whether anything changed."""
    if user.pk == by.pk:
        raise AccountError("You cannot deactivate your own account; another administrator can.", field="is_active")
    return _active_set(user=user, by=by, active=False)


def user_flags_set(*, user: User, by: User, is_staff: bool | None = None, is_superuser: bool | None = None) -> bool:
    """Give or take admin-site access (``is_staff``) and Django's superuser flag (which opens the admin site,
    never a portal role). Whether anything changed."""
    check_manage_users(by, action="change admin-site access")
    wanted = {"is_staff": is_staff, "is_superuser": is_superuser}
    with transaction.atomic():
        user = User.objects.select_for_update().get(pk=user.pk)
        changes = {
            name: [getattr(user, name), value]
            for name, value in wanted.items()
            if value is not None and getattr(user, name) != value
        }
        if not changes:
            return False
        for name, (_, value) in changes.items():
            setattr(user, name, value)
        user.save(update_fields=list(changes))
        event_record(actor=by, verb=Verb.USER_FLAGS_CHANGED, target=user, data=changes)
    return True


def user_email_change(*, user: User, by: User, email: str, password: str = "") -> User:
    """Change the address password links go to. The owner changes their own, confirming with their
    password. An administrator may correct it only on an account no one has used yet (never logged in,
    no password): otherwise they could point a member's address at their own mailbox, force a reset
    and set the member's password."""
    email = _email(email)
    if by.pk == user.pk:
        if not user.has_usable_password() or not user.check_password(password or ""):
            raise AccountError("The password is not right.", field="password")
    else:
        check_manage_users(by, action="change another person's e-mail address")
        if user.last_login is not None or user.has_usable_password():
            raise AccountError(
                f"{user.username} has used their account: only they can change its e-mail address.", field="email"
            )
    with transaction.atomic():
        user = User.objects.select_for_update().get(pk=user.pk)
        old = user.email
        if old == email:
            return user
        user.email = email
        user.save(update_fields=["email"])
        event_record(actor=by, verb=Verb.USER_EMAIL_CHANGED, target=user, data={"from": old, "to": email})
    return user


def _active_set(*, user: User, by: User, active: bool) -> bool:
    check_manage_users(by, action="activate or deactivate accounts")
    with transaction.atomic():
        user = User.objects.select_for_update().get(pk=user.pk)
        if user.is_active == active:
            return False
        user.is_active = active
        user.save(update_fields=["is_active"])
        event_record(actor=by, verb=Verb.USER_ACTIVATED if active else Verb.USER_DEACTIVATED, target=user)
    return True


def _password_link_send(*, user: User, reason: str) -> None:
    # The task makes the link when it mails it: the token is never stored (the outbox row holds the id).
    task_enqueue(name=MAIL_ACCOUNT_LINK_TASK, kwargs={"user_id": user.pk, "reason": reason})


def _username(username: str) -> str:
    username = fit_column(User, "username", (username or "").strip(), field="username")
    if not username:
        raise AccountError("The username is required.", field="username")
    try:
        User.username_validator(username)
    except ValidationError as exc:
        raise AccountError(f"{username!r}: {' '.join(exc.messages)}", field="username") from exc
    if User.objects.filter(username=username).exists():
        raise AccountError(f"There is already an account named {username!r}.", field="username")
    return username


def _email(email: str, *, required: bool = True) -> str:
    email = (email or "").strip()
    if not email:
        if required:
            raise AccountError(
                "The e-mail address is required: its owner sets their password from a link mailed there.",
                field="email",
            )
        return ""
    try:
        validate_email(email)
    except ValidationError as exc:
        raise AccountError(f"{email!r} is not an e-mail address.", field="email") from exc
    return fit_column(User, "email", email, field="email")


def _validated(password: str, user: User) -> None:
    try:
        validate_password(password or "", user)
    except ValidationError as exc:
        raise AccountError(" ".join(exc.messages), field="new_password") from exc


@transaction.atomic
def role_grant(
    *,
    user: User,
    role: Role,
    granted_by: User | None,
    proposal: RoleGrantProposal | None = None,
    data: Mapping[str, object] | None = None,
) -> RoleGrant:
    """Record the grant, its event and the role_changed signal. It checks nobody: a person's grant goes
    through role_grant_propose (the admin's actions, ``manage.py grant_role``, ``account create``), which
    calls this at once for a role that does not decide and, for one that does, only when a different
    administrator confirms (role_grant_confirm). Called directly only for the first administrator
    (user_bootstrap_create, grant_role's bootstrap), the DEBUG demo seed, and the portal-cli account's
    non-deciding role (tests/accounts/test_role_proposals.py lists the callers)."""
    grant, created = RoleGrant.objects.get_or_create(
        user=user, role=role, defaults={"granted_by": granted_by, "proposal": proposal}
    )
    if created:
        event_record(actor=granted_by, verb=Verb.ROLE_GRANTED, target=user, data={"role": role.value, **(data or {})})
    user.forget_roles()
    if created:
        role_changed.send(sender=User, user=user, role=Role(role), change="granted", by=granted_by)
    return grant


class RoleProposalError(AccountError):
    """A role grant or proposal that cannot go ahead as asked (already held, already proposed, closed)."""


def administrator_bootstrap_open(*, by: User) -> bool:
    """Whether ``by`` may grant the administrator role without a second administrator: only while they
    are the one active administrator and no other account has ever been granted the role (no RoleGrant,
    no role.granted event in the log). The window closes for good once a second administrator exists:
    revoking or deactivating administrators down to one does not reopen it."""
    admins = set(User.objects.filter(role_grants__role=Role.ADMIN, is_active=True).values_list("pk", flat=True))
    if admins != {by.pk}:
        return False
    if RoleGrant.objects.filter(role=Role.ADMIN).exclude(user=by).exists():
        return False
    return not (
        Event.objects.filter(verb=Verb.ROLE_GRANTED, target_type=User._meta.label_lower, data__role=Role.ADMIN.value)
        .exclude(target_id=str(by.pk))
        .exists()
    )


def role_grant_propose(*, user: User, role: Role | str, by: User) -> RoleGrant | RoleGrantProposal:
    """An administrator grants ``role`` to ``user``.

    A role that does not decide (rules.DECIDING_ROLES) is granted at once: the RoleGrant. A role that
    decides is a RoleGrantProposal, which takes effect only when an administrator who is neither ``by``
    nor ``user`` confirms it (role_grant_confirm): one person cannot make a second voter. The one
    exception makes a new installation's second administrator: the administrator role, granted by the
    sole administrator while no one else ever held it (administrator_bootstrap_open), applies at once
    and its event says so."""
    check_manage_roles(by)
    if str(role) not in Role.values:
        raise RoleProposalError(f"Unknown role {role!r}; choose one of {', '.join(Role.values)}.", field="role")
    role = Role(role)
    with transaction.atomic():
        # One proposal per person and role at a time: two administrators proposing at once queue here.
        user = User.objects.select_for_update().get(pk=user.pk)
        if user.has_role(role):
            raise RoleProposalError(f"{user.username} already holds the {role.noun} role.", field="role")
        if not needs_second_administrator(role):
            return role_grant(user=user, role=role, granted_by=by)
        if role == Role.ADMIN and administrator_bootstrap_open(by=by):
            return role_grant(user=user, role=role, granted_by=by, data={"bootstrap": "second administrator"})
        waiting = _role_proposals_open().filter(user=user, role=role).first()
        if waiting is not None:
            raise RoleProposalError(
                f"Role proposal #{waiting.pk} ({user.username} as {role.noun}, by "
                f"{waiting.proposed_by.get_username()}) already waits for a second administrator.",
                field="role",
            )
        proposal = RoleGrantProposal.objects.create(user=user, role=role, proposed_by=by)
        event_record(
            actor=by,
            verb=Verb.ROLE_GRANT_PROPOSED,
            target=proposal,
            data={"user": user.username, "user_id": user.pk, "role": role.value},
        )
        return proposal


def role_grant_confirm(*, proposal: RoleGrantProposal, by: User) -> RoleGrant:
    """The grant a pending proposal proposes, made by an administrator other than its proposer and its
    grantee, through role_grant (its event and the approvals app's round pause happen as for any grant).
    The RoleGrant records both: granted_by the confirmer, proposal.proposed_by the proposer."""
    check_confirm_role_proposal(by, proposal)
    try:
        with transaction.atomic():
            proposal = _role_proposal_open(proposal, action="confirmed")
            user = User.objects.select_for_update().get(pk=proposal.user_id)
            role = Role(proposal.role)
            proposer = proposal.proposed_by
            if not (proposer.is_active and proposer.role_grants.filter(role=Role.ADMIN).exists()):
                raise RoleProposalError(
                    f"Role proposal #{proposal.pk} is stale: its proposer {proposer.get_username()} is no longer "
                    "an active administrator. Withdraw it; an administrator may propose it again."
                )
            if not user.is_active:
                raise RoleProposalError(
                    f"Role proposal #{proposal.pk} cannot be confirmed: {user.username}'s account is deactivated."
                )
            if user.has_role(role):
                raise RoleProposalError(
                    f"Role proposal #{proposal.pk} cannot be confirmed: {user.username} already holds the "
                    f"{role.noun} role. Withdraw it."
                )
            RoleGrantProposalClosure.objects.create(
                proposal=proposal, outcome=RoleProposalOutcome.CONFIRMED, closed_by=by
            )
            people = {
                "proposal": proposal.pk,
                "proposed_by": proposer.get_username(),
                "confirmed_by": by.get_username(),
            }
            event_record(
                actor=by,
                verb=Verb.ROLE_GRANT_PROPOSAL_CONFIRMED,
                target=proposal,
                data={"user": user.username, "user_id": user.pk, "role": role.value, **people},
            )
            return role_grant(user=user, role=role, granted_by=by, proposal=proposal, data=people)
    except IntegrityError as exc:
        raise RoleProposalError(
            f"Role proposal #{proposal.pk} could not be confirmed: it or the grant changed at the same moment; "
            "reload and look again."
        ) from exc


def role_grant_withdraw(*, proposal: RoleGrantProposal, by: User) -> RoleGrantProposal:
    """Close a pending role proposal without a grant (any administrator: it grants nothing)."""
    check_withdraw_role_proposal(by, proposal)
    try:
        with transaction.atomic():
            proposal = _role_proposal_open(proposal, action="withdrawn")
            RoleGrantProposalClosure.objects.create(
                proposal=proposal, outcome=RoleProposalOutcome.WITHDRAWN, closed_by=by
            )
            event_record(
                actor=by,
                verb=Verb.ROLE_GRANT_PROPOSAL_WITHDRAWN,
                target=proposal,
                data={
                    "user": proposal.user.username,
                    "role": proposal.role,
                    "proposed_by": proposal.proposed_by.get_username(),
                },
            )
    except IntegrityError as exc:
        raise RoleProposalError(f"Role proposal #{proposal.pk} was closed by someone else at the same moment.") from exc
    proposal.refresh_from_db()
    return proposal


def _role_proposals_open() -> models.QuerySet[RoleGrantProposal]:
    return RoleGrantProposal.objects.filter(closure__isnull=True).select_related("proposed_by", "user")


def _role_proposal_open(proposal: RoleGrantProposal, *, action: str) -> RoleGrantProposal:
    """The proposal re-read under a row lock; refused when it is confirmed or withdrawn already."""
    locked = (
        RoleGrantProposal.objects.select_for_update(of=("self",))
        .select_related("proposed_by", "user")
        .get(pk=proposal.pk)
    )
    closure = RoleGrantProposalClosure.objects.select_related("closed_by").filter(proposal=locked).first()
    if closure is not None:
        raise RoleProposalError(
            f"Role proposal #{locked.pk} cannot be {action}: it was already {closure.outcome} by "
            f"{closure.closed_by.get_username()}."
        )
    return locked


@transaction.atomic
def role_revoke(*, user: User, role: Role, revoked_by: User | None) -> bool:
    deleted, _ = RoleGrant.objects.filter(user=user, role=role).delete()
    if deleted:
        event_record(actor=revoked_by, verb=Verb.ROLE_REVOKED, target=user, data={"role": role.value})
    user.forget_roles()
    if deleted:
        role_changed.send(sender=User, user=user, role=Role(role), change="revoked", by=revoked_by)
    return bool(deleted)


# Tokens whose account holds no role: the scope alone says what the token opens.
ROLELESS_SCOPES = frozenset({TokenScope.GATE, TokenScope.MONITORING})


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

    A gate token's account holds no role, so the token opens the gate and nothing else (and the
    deployments' status, the gate's answer over time); a monitoring token's neither, so it opens the
    monitoring endpoints (production batches, the deployments' status). An API token
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
        elif scope in ROLELESS_SCOPES and machine.is_member:
            opens = "the gate" if scope == TokenScope.GATE else "the monitoring endpoints"
            raise TokenError(
                f"{account!r} holds a role: a {scope.value} token's account must hold none, so that the token "
                f"opens {opens} and nothing else. Choose another name, or make an API token (scope 'api').",
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
