from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import Role
from auditportal.fairness.errors import UserError
from auditportal.reports import selectors, services


class Command(PortalCommand):
    help = (
        "Show the report certificate authorities, or rotate: a new organisation key (--organisation) or a new "
        "authority with a new organisation key under it (--authority). Earlier keys and certificates stay, so "
        "earlier reports still verify."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("show", help="list the authorities and their fingerprints")
        rotate = sub.add_parser("rotate", help="create a new organisation key, or a new authority")
        which = rotate.add_mutually_exclusive_group(required=True)
        which.add_argument("--organisation", action="store_true", help="a new organisation key and certificate")
        which.add_argument("--authority", action="store_true", help="a new root, and an organisation key under it")
        rotate.add_argument("--reason", required=True, help="why (kept in the activity log)")
        rotate.add_argument("--user", help="the administrator acting (required)")
        pem = sub.add_parser("pem", help="print the newest authority's certificate (PEM)")
        pem.add_argument("--id", type=int, help="another authority's id")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "show":
            if not selectors.certificate_authority_list().exists():
                self.stdout.write("No certificate authority yet: the first report creates one.")
            for item in selectors.certificate_authority_list():
                self.stdout.write(
                    f"#{item.pk} {item.common_name}  SHA-256 {item.fingerprint}  valid to {item.not_after:%Y-%m-%d}"
                )
            return
        if action == "pem":
            found = selectors.certificate_authority_list()
            authority = found.filter(pk=options["id"]).first() if options["id"] is not None else found.first()
            if authority is None:
                raise CommandError("No such certificate authority.")
            self.stdout.write(authority.certificate_pem.rstrip("\n"))
            return
        actor = cli_user(options["user"], role=Role.ADMIN)
        try:
            if options["authority"]:
                created = services.certificate_authority_create(actor=actor, reason=options["reason"])
                self.stdout.write(f"New certificate authority #{created.pk}: SHA-256 {created.fingerprint}")
            else:
                certificate = services.organisation_certificate_create(actor=actor, reason=options["reason"])
                self.stdout.write(f"New organisation certificate #{certificate.pk}: SHA-256 {certificate.fingerprint}")
        except UserError as exc:
            raise CommandError(f"--reason: {exc}") from exc
