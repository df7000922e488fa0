# factory_boy ships no type information for its declarations; the typed entry point is make_user().
# mypy: disable-error-code="attr-defined,misc,no-untyped-call"
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import factory

from auditportal.accounts.models import Role, RoleGrant, User

PASSWORD = "correct horse battery staple"


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.org")

    @factory.post_generation
    def password(self, create: bool, extracted: str | None, **kwargs: Any) -> None:
        self.set_password(extracted or PASSWORD)
        if create:
            self.save(update_fields=["password"])

    @factory.post_generation
    def roles(self, create: bool, extracted: list[Role] | None, **kwargs: Any) -> None:
        for role in extracted or []:
            RoleGrant.objects.create(user=self, role=role)
        self.forget_roles()


def make_user(username: str, roles: Iterable[Role] = (), password: str = PASSWORD) -> User:
    return cast(User, UserFactory(username=username, roles=list(roles), password=password))
