from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from auditportal.accounts.models import Role, User
from auditportal.accounts.services import role_grant, user_create

DEMO_USERS: tuple[tuple[str, Role], ...] = (
    ("steward", Role.DATA_STEWARD),
    ("engineer", Role.ML_ENGINEER),
    ("reviewer", Role.REVIEWER),
    ("committee", Role.ETHICS_COMMITTEE),
    ("admin", Role.ADMIN),
)


class Command(BaseCommand):
    help = "Create (or reset) one demo user per role and print their passwords. Development only."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--password", help="use this password for every demo user instead of random ones")

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError("seed_demo refuses to run with DEBUG off: demo accounts do not belong in production")
        rows = []
        with transaction.atomic():
            for username, role in DEMO_USERS:
                password = options["password"] or secrets.token_urlsafe(9)
                user = User.objects.filter(username=username).first()
                if user is None:
                    user = user_create(username=username, password=password, roles=[role])
                else:
                    user.set_password(password)
                    user.save(update_fields=["password"])
                    role_grant(user=user, role=role, granted_by=None)
                if role == Role.ADMIN and not (user.is_staff and user.is_superuser):
                    user.is_staff = user.is_superuser = True
                    user.save(update_fields=["is_staff", "is_superuser"])
                rows.append((username, password, role.label))
        self.stdout.write("Demo users (development only):")
        for username, password, label in rows:
            self.stdout.write(f"  {username:<10} {password:<16} {label}")
