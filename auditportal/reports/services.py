"""Writes of the reports app: the certificate authority and its certificates, reports and their signed
revisions (docs/reports.md). Every write records its activity event in the same transaction; nothing
here updates or deletes a row or rewrites a stored file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.staticfiles import finders
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.accounts.services import user_reauthenticate
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.fairness.documents.report_context import ReportContext
from auditportal.fairness.errors import UserError
from auditportal.monitoring import selectors as monitoring_selectors
from auditportal.monitoring.models import Deployment
from auditportal.reports import figures, rendering, rules, signing
from auditportal.reports.models import (
    CertificateAuthority,
    CertificateKind,
    Report,
    ReportRevision,
    RevisionKind,
    SigningCertificate,
)
from auditportal.reports.monitoring_context import monitoring_report_context

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock key serialising the creation of authorities and certificates ("reports").
KEYS_LOCK = 0x7265706F727473
STAMP_FONT = "fonts/DejaVuSans.ttf"
ORGANISATION_TITLE = "Organisation"
# The decisions of a review request that make a report (docs/approvals.md).
REQUEST_OUTCOMES = ("approved", "rejected", "revoked")


class SigningKeyUnavailable(RuntimeError):
    """A stored private key does not open with REPORT_KEY_PASSPHRASE (changed since it was made)."""


class ReportIntegrityError(RuntimeError):
    """A stored report file no longer has the SHA-256 recorded for it."""


class NotASignatory(UserError):
    pass


class AlreadySigned(UserError):
    pass


# --- the certificate authority --------------------------------------------------------------------


def certificate_authority_create(*, actor: User | None, reason: str) -> CertificateAuthority:
    """A new root of the portal's authority, and a new organisation certificate under it.

    The first is made on first use; a later one is a rotation (a new passphrase, a key thought exposed,
    a root near its end). Earlier roots and certificates stay: reports they signed still verify, and
    their certificates are still served. Administrators only (``actor`` None: the system).
    """
    if actor is not None:
        rules.check_rotate_keys(actor)
    if not reason.strip():
        raise UserError("Say why the certificate authority is created (kept in the activity log).", field="reason")
    with transaction.atomic():
        _lock_keys()
        authority = _authority_create(actor=actor, reason=reason.strip())
        _organisation_issue(authority=authority, actor=actor)
    return authority


def organisation_certificate_create(*, actor: User | None, reason: str) -> SigningCertificate:
    """A new organisation key and certificate under the current root: new reports are certified with
    it; those certified before keep verifying with theirs. Administrators only."""
    if actor is not None:
        rules.check_rotate_keys(actor)
    if not reason.strip():
        raise UserError("Say why the organisation key is replaced (kept in the activity log).", field="reason")
    with transaction.atomic():
        _lock_keys()
        authority = _authority_current(actor=actor)
        return _organisation_issue(authority=authority, actor=actor, reason=reason.strip())


def organisation_credentials(*, actor: User | None) -> signing.Credentials:
    """The current organisation key and certificate, opened (made on first use): what signs the
    activity log's exported heads (reports/heads.py) as it certifies reports."""
    return _credentials(_organisation_current(actor=actor))


def _authority_current(*, actor: User | None) -> CertificateAuthority:
    """The newest root, made on first use. Call inside a transaction holding the keys lock."""
    authority = CertificateAuthority.objects.order_by("-id").first()
    if authority is None:
        authority = _authority_create(actor=actor, reason="first report: the portal's authority is created")
    return authority


def _authority_create(*, actor: User | None, reason: str) -> CertificateAuthority:
    now = timezone.now()
    organisation = settings.REPORT_ORGANISATION
    number = CertificateAuthority.objects.count() + 1
    key, certificate = signing.new_authority(
        common_name=f"{organisation} report authority {number}", organisation=organisation, now=now
    )
    authority = CertificateAuthority.objects.create(
        common_name=f"{organisation} report authority {number}",
        organisation=organisation,
        certificate_pem=signing.certificate_pem(certificate),
        fingerprint=signing.fingerprint(certificate),
        encrypted_key_pem=signing.encrypt_private_key(key, passphrase=settings.REPORT_KEY_PASSPHRASE),
        not_before=certificate.not_valid_before_utc,
        not_after=certificate.not_valid_after_utc,
        created_by=actor,
        reason=reason,
    )
    event_record(
        actor=actor,
        verb=Verb.CERTIFICATE_AUTHORITY_CREATED,
        target=authority,
        data={"fingerprint": authority.fingerprint, "common_name": authority.common_name, "reason": reason},
    )
    return authority


def _organisation_current(*, actor: User | None) -> SigningCertificate:
    with transaction.atomic():
        _lock_keys()
        authority = _authority_current(actor=actor)
        certificate = (
            SigningCertificate.objects.filter(
                kind=CertificateKind.ORGANISATION, authority=authority, not_after__gt=timezone.now()
            )
            .order_by("-id")
            .first()
        )
        if certificate is None:
            certificate = _organisation_issue(authority=authority, actor=actor)
        return certificate


def _organisation_issue(
    *, authority: CertificateAuthority, actor: User | None, reason: str = "new authority"
) -> SigningCertificate:
    return _issue(
        authority=authority,
        kind=CertificateKind.ORGANISATION,
        holder=None,
        common_name=f"{authority.organisation} reports",
        title=ORGANISATION_TITLE,
        actor=actor,
        reason=reason,
    )


def _member_certificate(*, member: User, title: str) -> SigningCertificate:
    """The member's certificate under the current root with this title, issued on first use."""
    _lock_keys()
    authority = _authority_current(actor=member)
    certificate = (
        SigningCertificate.objects.filter(
            kind=CertificateKind.MEMBER,
            authority=authority,
            holder=member,
            title=title,
            common_name=_display_name(member),
            not_after__gt=timezone.now(),
        )
        .order_by("-id")
        .first()
    )
    if certificate is None:
        certificate = _issue(
            authority=authority,
            kind=CertificateKind.MEMBER,
            holder=member,
            common_name=_display_name(member),
            title=title,
            actor=member,
            reason="first signature",
        )
    return certificate


def _issue(
    *,
    authority: CertificateAuthority,
    kind: CertificateKind,
    holder: User | None,
    common_name: str,
    title: str,
    actor: User | None,
    reason: str,
) -> SigningCertificate:
    key, certificate = signing.issue_certificate(
        authority=_authority_credentials(authority),
        common_name=common_name,
        organisation=authority.organisation,
        title=title,
        now=timezone.now(),
    )
    issued = SigningCertificate.objects.create(
        kind=kind,
        authority=authority,
        holder=holder,
        common_name=common_name,
        title=title,
        certificate_pem=signing.certificate_pem(certificate),
        fingerprint=signing.fingerprint(certificate),
        serial=format(certificate.serial_number, "x"),
        encrypted_key_pem=signing.encrypt_private_key(key, passphrase=settings.REPORT_KEY_PASSPHRASE),
        not_before=certificate.not_valid_before_utc,
        not_after=certificate.not_valid_after_utc,
        created_by=actor,
    )
    event_record(
        actor=actor,
        verb=Verb.SIGNING_CERTIFICATE_ISSUED,
        target=issued,
        data={
            "kind": kind.value,
            "holder": holder.get_username() if holder is not None else None,
            "common_name": common_name,
            "title": title,
            "fingerprint": issued.fingerprint,
            "authority": authority.fingerprint,
            "reason": reason,
        },
    )
    return issued


def _authority_credentials(authority: CertificateAuthority) -> signing.Credentials:
    certificate = signing.load_certificate(authority.certificate_pem)
    return signing.Credentials(
        certificate=certificate,
        private_key=_decrypt(authority.encrypted_key_pem, what=str(authority)),
        chain=(certificate,),
    )


def _credentials(certificate: SigningCertificate) -> signing.Credentials:
    return signing.Credentials(
        certificate=signing.load_certificate(certificate.certificate_pem),
        private_key=_decrypt(certificate.encrypted_key_pem, what=str(certificate)),
        chain=(signing.load_certificate(certificate.authority.certificate_pem),),
    )


def _decrypt(pem: str, *, what: str) -> RSAPrivateKey:
    try:
        return signing.decrypt_private_key(pem, passphrase=settings.REPORT_KEY_PASSPHRASE)
    except signing.KeyDecryptionError as exc:
        raise SigningKeyUnavailable(
            f"REPORT_KEY_PASSPHRASE does not open the key of {what}: it changed since the key was made. "
            "Set the old passphrase again, or create a new authority (`manage.py report_keys rotate --authority`)."
        ) from exc


def _lock_keys() -> None:
    # Two first reports at once must not make two authorities. SQLite lets one writer in at a time.
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [KEYS_LOCK])


def _display_name(user: User) -> str:
    return user.get_full_name() or user.get_username()


# --- reports --------------------------------------------------------------------------------------


def report_generate(
    *,
    context: ReportContext,
    actor: User | None = None,
    review_request_id: int | None = None,
    with_figures: bool = False,
) -> Report:
    """Render ``context``, certify it with the organisation's key and store it: the report of this
    context. Generated once: the same context (by its SHA-256) returns the stored report unchanged.

    ``review_request_id``: the review request whose decision (``context.decision.outcome``: approved,
    rejected or revoked) the report records; one report per request and outcome, so a retried task
    returns the stored one even though its figures' SVG would differ (the context, built by the decision,
    titles it by the request and prints its checkpoint without the server's folder).
    ``with_figures``: add the figures of the context's documents first (``figures.context_with_figures``:
    a Chromium export, which only the worker has warm).

    Runs outside a transaction (rendering takes seconds); callers queue ``reports.tasks.report_generate_task``
    by its name, ``reports.generate``, once their own transaction commits (a decision's report:
    approvals.services).
    """
    outcome = ""
    if review_request_id is not None:
        if context.decision is None or context.decision.outcome not in REQUEST_OUTCOMES:
            raise ValueError(f"the report of review request #{review_request_id} needs a decision")
        outcome = context.decision.outcome
        existing = Report.objects.filter(review_request_id=review_request_id, request_outcome=outcome).first()
        if existing is not None:
            return existing
    if with_figures:
        context = figures.context_with_figures(context)
    context_sha256 = context.sha256
    existing = Report.objects.filter(context_sha256=context_sha256).first()
    if existing is not None:
        return existing
    certificate = _organisation_current(actor=actor)

    def theirs() -> Report:
        # The same context (or request decision) generated at the same moment by another worker.
        if review_request_id is not None:
            return Report.objects.get(review_request_id=review_request_id, request_outcome=outcome)
        return Report.objects.get(context_sha256=context_sha256)

    report, _ = _report_store(
        rendered=rendering.render(context),
        certificate=certificate,
        actor=actor,
        report_fields={
            "title": context.title,
            "subject_label": context.subject.label,
            "context_json": context.canonical.decode(),
            "context_sha256": context_sha256,
            "signatory_count": len(context.signatories),
            "review_request_id": review_request_id,
            "request_outcome": outcome,
        },
        verb=Verb.REPORT_CREATED,
        event_data={
            "title": context.title,
            "subject": context.subject.label,
            "context_sha256": context_sha256,
            "documents": [document.sha256 for document in context.documents],
            "signatories": [person.key for person in context.signatories],
            "review_request": review_request_id,
            "outcome": outcome or None,
        },
        theirs=theirs,
    )
    return report


def monitoring_report_generate(
    *,
    actor: User,
    deployment: Deployment,
    start: dt.datetime,
    end: dt.datetime,
    now: dt.datetime | None = None,
    with_figures: bool = True,
) -> tuple[Report, bool]:
    """The certified monitoring report of ``deployment`` over ``[start, end)`` (docs/monitoring.md,
    "Monitoring reports"), and whether it was made now (False: the period's report was stored before,
    and is returned unchanged: one report per deployment and period, never regenerated).

    Administrators, ethics-committee members and reviewers ask for one (rules.check_request_monitoring_report).
    The period must start before it ends and must have ended (``now``, for tests): a report of a period
    still running would say something else tomorrow. A period without batches makes a report that
    says so. Certified by the organisation; no member signs it (nothing in it is a decision).

    The PDF prints the page's charts over the period's looks (each watched metric per group with its
    band and limit, the group shares against training: ``figures.monitoring_figures``); they are drawn
    from the looks, not stored in the context. ``with_figures=False`` leaves them out (tests of the
    context alone).

    Synchronous, as a member's signature is: a period's report renders in about a second, plus about
    two for the figures where no warm Chromium runs (one browser for all of them; the PDF lists at most
    the newest ``monitoring_report.PRINTED_ROWS`` batches and looks; the attached CSV and JSON hold
    all). Runs outside a transaction.
    """
    rules.check_request_monitoring_report(actor)
    monitoring_period_check(start=start, end=end, now=now)
    existing = Report.objects.filter(deployment=deployment, period_start=start, period_end=end).first()
    if existing is not None:
        return existing, False
    context = monitoring_report_context(deployment=deployment, start=start, end=end, requested_by=actor)
    certificate = _organisation_current(actor=actor)
    drawn = figures.monitoring_figures(
        monitoring_selectors.look_figures(deployment=deployment, start=start, end=end) if with_figures else [],
        looks=[look.seq for look in context.looks],
    )
    return _report_store(
        rendered=rendering.render_monitoring(context, figures=drawn),
        certificate=certificate,
        actor=actor,
        report_fields={
            "title": context.title,
            "subject_label": context.subject_label,
            "context_json": context.canonical.decode(),
            "context_sha256": context.sha256,
            "signatory_count": 0,
            "deployment": deployment,
            "period_start": start,
            "period_end": end,
        },
        verb=Verb.MONITORING_REPORT_CREATED,
        event_data={
            "deployment": deployment.name,
            "from": context.start,
            "to": context.end,
            "context_sha256": context.sha256,
            "batches": len(context.batches),
            "incidents": [{"id": item.id, "sha256": item.sha256} for item in context.incidents],
        },
        # The same period asked for at the same moment by someone else.
        theirs=lambda: Report.objects.get(deployment=deployment, period_start=start, period_end=end),
    )


def _report_store(
    *,
    rendered: rendering.RenderedReport,
    certificate: SigningCertificate,
    actor: User | None,
    report_fields: dict[str, Any],
    verb: Verb,
    event_data: dict[str, Any],
    theirs: Callable[[], Report],
) -> tuple[Report, bool]:
    """Certify ``rendered`` with the organisation's ``certificate``, store the file, and write the
    report, its certified revision and its event (``event_data`` with the file's SHA-256, the pages and
    the certificate) in one transaction; and whether this call made it. When the database refuses the
    report as a duplicate (the same report made at the same moment elsewhere) the file is removed and
    ``theirs()`` is the report; on any other failure the file is removed and the error raised."""
    fields = rendered.fields
    certified = signing.certify(
        rendered.pdf,
        credentials=_credentials(certificate),
        organisation=certificate.authority.organisation,
        certification=fields[0],
        later=fields[1:],
        font=_stamp_font(),
    )
    file_name, sha256 = _store(certified)
    try:
        with transaction.atomic():
            report = Report.objects.create(pages=rendered.pages, created_by=actor, **report_fields)
            revision = ReportRevision.objects.create(
                report=report,
                number=1,
                kind=RevisionKind.CERTIFIED,
                field_name=fields[0].name,
                signer=None,
                certificate=certificate,
                sha256=sha256,
                size_bytes=len(certified),
                file_name=file_name,
            )
            event_record(
                actor=actor,
                verb=verb,
                target=report,
                data={
                    **event_data,
                    "sha256": revision.sha256,
                    "pages": report.pages,
                    "certificate": certificate.fingerprint,
                },
            )
    except IntegrityError:
        _discard(file_name)
        return theirs(), False
    except BaseException:
        _discard(file_name)
        raise
    return report, True


def monitoring_period_check(*, start: dt.datetime, end: dt.datetime, now: dt.datetime | None = None) -> None:
    """A UserError naming the field (``from`` or ``to``) unless ``[start, end)`` is a period that has ended."""
    if start >= end:
        raise UserError(
            f"The period must start before it ends: from {start.isoformat()} is not before to {end.isoformat()}.",
            field="from",
        )
    moment = now or timezone.now()
    if end > moment:
        raise UserError(
            f"The period must have ended: to {end.isoformat()} is after now ({moment.isoformat(timespec='seconds')}). "
            "A report is made once per period and never changes, so its period must be over.",
            field="to",
        )


def report_sign_member(*, report: Report, member: User, password: str) -> ReportRevision:
    """Add ``member``'s signature to the newest revision of ``report``, as a new stored revision.

    Only an ethics-committee member listed among the report's signatories may sign, once. A signature
    is a decision on the record: ``password`` must be the member's own, checked now by accounts'
    re-authentication service (a wrong one is refused and recorded, REPORT_SIGN_REAUTH_FAILED; five
    within 15 minutes, votes' included, lock the member's signing). The newest file is checked
    against its recorded SHA-256 before anything is added to it.

    Must not run inside an open transaction (a wrong password's record must commit).
    """
    rules.check_sign(member)
    if report.is_monitoring:
        raise NotASignatory(
            f"Report #{report.pk} is a monitoring report: the organisation certifies it, no member signs it."
        )
    context = ReportContext.from_json(report.context)
    index = next(
        (number for number, person in enumerate(context.signatories, start=1) if person.key == member.get_username()),
        None,
    )
    if index is None:
        raise NotASignatory(f"{member.get_username()} is not among the signatories of report #{report.pk}.")
    person = context.signatories[index - 1]
    field_name = rendering.member_field(index)
    if report.revisions.filter(field_name=field_name).exists():
        raise AlreadySigned(f"{member.get_username()} has already signed report #{report.pk}.")
    user_reauthenticate(user=member, password=password, purpose="report_signature", target=report)
    font = _stamp_font()
    file_name: str | None = None
    try:
        with transaction.atomic():
            locked = Report.objects.select_for_update().get(pk=report.pk)
            if locked.revisions.filter(field_name=field_name).exists():
                raise AlreadySigned(f"{member.get_username()} has already signed report #{report.pk}.")
            latest = locked.revisions.order_by("-number").first()
            assert latest is not None
            data = _read_checked(latest)
            certificate = _member_certificate(member=member, title=person.role)
            signed = signing.sign_field(
                data, credentials=_credentials(certificate), field_name=field_name, role=person.role, font=font
            )
            file_name, sha256 = _store(signed)
            revision = ReportRevision.objects.create(
                report=locked,
                number=latest.number + 1,
                kind=RevisionKind.MEMBER_SIGNED,
                field_name=field_name,
                signer=member,
                certificate=certificate,
                sha256=sha256,
                size_bytes=len(signed),
                file_name=file_name,
            )
            event_record(
                actor=member,
                verb=Verb.REPORT_SIGNED,
                target=locked,
                data={
                    "revision": revision.number,
                    "field": field_name,
                    "sha256": sha256,
                    "previous_sha256": latest.sha256,
                    "certificate": certificate.fingerprint,
                    "role": person.role,
                },
            )
    except BaseException:
        if file_name is not None:
            _discard(file_name)
        raise
    return revision


def report_file(*, revision: ReportRevision) -> bytes:
    """The stored bytes of ``revision``, checked against its SHA-256."""
    return _read_checked(revision)


def _read_checked(revision: ReportRevision) -> bytes:
    data = revision.path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != revision.sha256:
        raise ReportIntegrityError(
            f"{revision.path}: SHA-256 {digest} differs from the {revision.sha256} recorded for report "
            f"#{revision.report_id} revision {revision.number}"
        )
    return data


def _store(data: bytes) -> tuple[str, str]:
    """Write ``data`` once under REPORT_STORAGE_DIR, named by its SHA-256; never over an existing file."""
    sha256 = hashlib.sha256(data).hexdigest()
    file_name = f"{sha256[:2]}/{sha256}.pdf"
    target = Path(settings.REPORT_STORAGE_DIR) / file_name
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".incoming-", delete=False) as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.chmod(handle.name, 0o400)  # read-only, and private like every file the portal writes
        os.link(handle.name, target)  # fails if the name exists: a stored file is never replaced
    finally:
        os.unlink(handle.name)
    return file_name, sha256


def _discard(file_name: str) -> None:
    # A file whose revision was not committed. Its name is the SHA-256 of a fresh signature, which no
    # other revision can have (_store refuses to write over an existing name).
    (Path(settings.REPORT_STORAGE_DIR) / file_name).unlink(missing_ok=True)


def _stamp_font() -> Path:
    source = finders.find(STAMP_FONT)
    if not isinstance(source, str):
        raise RuntimeError(f"static/{STAMP_FONT} is missing: the signature stamps need it")
    return signing.stamp_font(Path(source), Path(settings.VAR_DIR) / "cache")
