from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from auditportal.accounts.models import Role, RoleGrant, User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record


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
    return grant


@transaction.atomic
def role_revoke(*, user: User, role: Role, revoked_by: User | None) -> bool:
    deleted, _ = RoleGrant.objects.filter(user=user, role=role).delete()
    if deleted:
        event_record(actor=revoked_by, verb=Verb.ROLE_REVOKED, target=user, data={"role": role.value})
    user.forget_roles()
    return bool(deleted)
