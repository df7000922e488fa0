from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Final

import pyarrow.csv as pacsv
from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from auditportal.accounts import services as account_services
from auditportal.accounts.cli import DEMO_USERS, PortalCommand
from auditportal.accounts.models import ApiToken, Role, TokenScope, User
from auditportal.approvals import selectors as approval_selectors
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import RequestState, ReviewRequest, VoteChoice
from auditportal.audits import services as audit_services
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE
from auditportal.fairness.files import traffic as gen
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.lib.files import write_private_text
from auditportal.monitoring import selectors, services
from auditportal.monitoring.models import Deployment

DEPLOYMENT: Final = "demo-credit/prod"
MODELS: Final = ("demo-credit:1", "demo-credit:2")  # A, then B
ACCOUNT: Final = "demo-scoring"
TOKEN_NAME: Final = "demo traffic"  # noqa: S105 (a token's name, not its secret)
# The demo dataset's groups and shares (datasets/demo.py): the audited data each model rests on.
SHARES: Final = {
    "gender": {"female": 0.46, "male": 0.44, "nonbinary": 0.02, gen.UNKNOWN: 0.08},
    "age_group": {"18-29": 0.22, "30-44": 0.31, "45-64": 0.33, "65+": 0.14},
}
AUDIT_ROWS: Final = 10_000


class Command(PortalCommand):
    help = (
        f"Create the monitoring demo (development only): two approved models ({MODELS[0]} and {MODELS[1]}, each "
        f"a prediction audit approved by the demo committee), the deployment {DEPLOYMENT} with the first promoted "
        f"and then the second, and a monitoring token for the account {ACCOUNT!r} (--token-file). Idempotent: a "
        "second run leaves an existing deployment as it is and only replaces the demo token."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--logins", type=Path, metavar="PATH", help="seed_demo's --password-file: the committee's passwords"
        )
        parser.add_argument("--password", help="the demo users' password (seed_demo --password), instead of --logins")
        parser.add_argument(
            "--token-file", type=Path, metavar="PATH", help="write a fresh monitoring token here (0600)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError(
                "seed_demo_deployment refuses to run with DEBUG off: the demo does not belong in production"
            )
        users = _demo_users()
        deployment = Deployment.objects.filter(name=DEPLOYMENT).first()
        if deployment is not None:
            self.stdout.write(f"{DEPLOYMENT} exists ({deployment.state}: {deployment.model_identifier or '-'}): kept")
        else:
            passwords = _passwords(options, users)
            # Votes check passwords outside any transaction (a wrong one's record must commit), so the
            # steps are not one transaction: a run stopped half-way is taken up where it stopped.
            for model in MODELS:
                request = _approved(model, users, passwords)
                self.stdout.write(f"{model}: review request #{request.pk} approved")
            with transaction.atomic():
                deployment = services.deployment_create(
                    user=users["engineer"],
                    name=DEPLOYMENT,
                    description="Demo: loan pre-screening, fed by manage.py simulate_traffic",
                    model_identifier=MODELS[0],
                )
                services.deployment_promote(
                    deployment=deployment, model_identifier=MODELS[1], by=users["engineer"], reason="demo: B after A"
                )
            status = selectors.deployment_status(name=DEPLOYMENT)
            self.stdout.write(f"{DEPLOYMENT}: {status.state}, {status.model} serves (promoted after {MODELS[0]})")
        if options["token_file"] is not None:
            secret = _token(users["admin"])
            try:
                write_private_text(options["token_file"], secret + "\n")
            except OSError as exc:
                raise CommandError(f"--token-file {options['token_file']}: {exc.strerror}") from exc
            self.stdout.write(f"Monitoring token of {ACCOUNT!r} written to {options['token_file']}")


def _demo_users() -> dict[str, User]:
    users = {user.username: user for user in User.objects.filter(username__in=[name for name, _ in DEMO_USERS])}
    missing = [name for name, _ in DEMO_USERS if name not in users]
    if missing:
        raise CommandError(f"run seed_demo first: no demo account {', '.join(missing)}")
    return users


def _passwords(options: dict[str, Any], users: dict[str, User]) -> dict[str, str]:
    """The committee's passwords: each vote is signed with the voter's own, as on the page."""
    if options["password"]:
        passwords = {name: options["password"] for name in users}
    elif options["logins"] is not None:
        try:
            lines = options["logins"].read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CommandError(f"--logins {options['logins']}: {exc.strerror}") from exc
        passwords = {parts[0]: parts[1] for parts in (line.split() for line in lines) if len(parts) >= 2}
    else:
        raise CommandError("the committee votes with its passwords: give --logins (seed_demo's file) or --password")
    for name in ("committee", "committee2"):
        if not users[name].check_password(passwords.get(name, "")):
            raise CommandError(f"no valid password for the demo account {name!r} (run seed_demo again)")
    return passwords


def _approved(model: str, users: dict[str, User], passwords: dict[str, str]) -> ReviewRequest:
    """``model``'s prediction audit (fair: FNR 3%, FPR 10% in every group), asked for by the engineer,
    reviewed by the reviewer and approved by the two committee members (the default quorum). The request
    an earlier run left is taken up where it stopped."""
    request = ReviewRequest.objects.filter(model_identifier=model).order_by("-pk").first()
    if request is None:
        request = _requested(model, users)
    if request.state == RequestState.DRAFT:
        request = approval_services.review_request_submit(user=users["engineer"], request=request)
    if request.state == RequestState.SUBMITTED:
        request = approval_services.review_request_start_review(user=users["reviewer"], request=request)
    if request.state == RequestState.IN_REVIEW:
        _votes(request, users, passwords)
    request.refresh_from_db()
    if request.state != RequestState.APPROVED:
        raise CommandError(
            f"the demo's review request #{request.pk} for {model} is {request.state}, not approved: "
            "remove var/ to start the demo afresh"
        )
    return request


def _requested(model: str, users: dict[str, User]) -> ReviewRequest:
    traffic = gen.Traffic(shares=SHARES)
    seed = MODELS.index(model) + 1
    table = gen.traffic_batch(traffic, rows=AUDIT_ROWS, seed=seed, number=0).drop_columns([gen.ROW_KEY])
    with tempfile.TemporaryDirectory(prefix="demo-deployment-") as directory:
        path = Path(directory) / f"{model.replace(':', '-')}-predictions.csv"
        pacsv.write_csv(table, path)
        audit = audit_services.prediction_audit_run(
            user=users["engineer"],
            source=path,
            original_name=path.name,
            spec=AuditSpec(label=gen.LABEL, prediction=gen.PREDICTION, attributes=tuple(SHARES)),
        )
    return approval_services.review_request_create(
        user=users["engineer"],
        title=f"Demo credit model {model}",
        intended_use="Pre-screening of loan applications (demo)",
        documents=[verdict_document_of_audit(audit=audit)],
        model_identifier=model,
    )


def _votes(request: ReviewRequest, users: dict[str, User], passwords: dict[str, str]) -> None:
    model = request.model_identifier
    findings = approval_selectors.review_request_findings(request=request)
    if any(status.finding.verdict == FAIL for status in findings):
        raise CommandError(f"the demo audit of {model} has FAIL findings; the demo expects a fair model")
    hashes = sorted(request.documents.values_list("sha256", flat=True))
    for member in ("committee", "committee2"):
        approval_services.review_vote_cast(
            user=users[member],
            request=request,
            choice=VoteChoice.APPROVE,
            reason="demo: fit for pre-screening",
            password=passwords[member],
            document_sha256=hashes,
            acknowledged=[s.finding.key for s in findings if s.finding.verdict == INCONCLUSIVE],
        )
        request.refresh_from_db()
        if request.state != RequestState.IN_REVIEW:
            break


def _token(admin: User) -> str:
    """A fresh monitoring token for the demo account; the demo's earlier ones are revoked (one live)."""
    if not admin.has_role(Role.ADMIN):
        raise CommandError("the demo account 'admin' no longer holds the administrator role")
    with transaction.atomic():
        for token in ApiToken.objects.filter(user__username=ACCOUNT, name=TOKEN_NAME, revoked_at__isnull=True):
            account_services.api_token_revoke(user=admin, token=token)
        issued = account_services.api_token_create(
            user=admin, account=ACCOUNT, name=TOKEN_NAME, days=7, scope=TokenScope.MONITORING
        )
    return str(issued.secret)
