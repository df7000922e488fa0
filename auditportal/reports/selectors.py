from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Count, F, Q, QuerySet
from django.http import Http404

from auditportal.accounts.models import User
from auditportal.approvals.models import ReviewRequest
from auditportal.fairness.documents.report_context import REPORT_STATES, SIGNED, signing_state
from auditportal.fairness.errors import UserError
from auditportal.monitoring.models import Deployment
from auditportal.monitoring.names import name_problem
from auditportal.reports import rules, signing
from auditportal.reports.models import CertificateAuthority, Report, ReportRevision, RevisionKind
from auditportal.reports.verification import Bounds, PdfVerification, verify_pdf_bounded

if TYPE_CHECKING:
    from cryptography import x509


def report_list(
    *,
    user: User,
    review_request_id: int | None = None,
    model: str | None = None,
    state: str | None = None,
    deployment: str | None = None,
) -> QuerySet[Report]:
    """The reports ``user`` may read, newest first; of one review request, of the requests naming one
    model identifier, in one signing state (report_context.REPORT_STATES), or the monitoring reports of
    the deployment named ``deployment``, when given. A state or model that cannot be one is a UserError
    naming the field."""
    if state is not None and state not in REPORT_STATES:
        raise UserError(f"The state is one of {', '.join(REPORT_STATES)}, not {state[:40]!r}.", field="state")
    if deployment is not None and name_problem(deployment) is not None:
        raise UserError(f"No deployment is named {deployment[:120]!r}: {name_problem(deployment)}", field="deployment")
    if model is not None and (not model.strip() or "\x00" in model):
        # PostgreSQL cannot even compare text holding a NUL.
        raise UserError("Name the model by its identifier, as its review request does.", field="model")
    if not rules.can_view(user):
        return Report.objects.none()
    reports = Report.objects.select_related("review_request", "deployment").prefetch_related("revisions__signer")
    if deployment is not None:
        reports = reports.filter(deployment__name=deployment)
    if review_request_id is not None:
        reports = reports.filter(review_request_id=review_request_id)
    if model is not None:
        reports = reports.filter(review_request__model_identifier=model)
    if state is not None:
        signed = Count("revisions", filter=Q(revisions__kind=RevisionKind.MEMBER_SIGNED))
        reports = reports.annotate(signed=signed)
        # signing_state: signed once as many members signed as the report names.
        complete = Q(signed__gte=F("signatory_count"))
        reports = reports.filter(complete if state == SIGNED else ~complete)
    return reports.order_by("-created_at", "-id")


def report_state(*, report: Report) -> str:
    """``report``'s signing state (report_context.signing_state), from its revisions (prefetched by
    report_list)."""
    signed = sum(1 for revision in report.revisions.all() if revision.kind == RevisionKind.MEMBER_SIGNED)
    return signing_state(signatories=report.signatory_count, signed=signed)


def review_request_reports(*, request: ReviewRequest) -> QuerySet[Report]:
    """The reports of ``request``'s decisions, oldest first: the approval's or the rejection's, then,
    after a revocation, the revocation's (the earlier one stays). Empty until the worker has stored the
    first. The caller has already checked that its user may see the request (approvals selectors)."""
    return (
        Report.objects.filter(review_request=request).prefetch_related("revisions__signer").order_by("created_at", "id")
    )


def deployment_reports(*, user: User, deployment: Deployment) -> QuerySet[Report]:
    """The monitoring reports of ``deployment`` that ``user`` may read, newest period first."""
    return report_list(user=user).filter(deployment=deployment).order_by("-period_end", "-period_start", "-id")


def report_get(*, user: User, report_id: int) -> Report:
    try:
        return report_list(user=user).select_related("review_request").get(pk=report_id)
    except Report.DoesNotExist:
        raise Http404("No such report.") from None


def report_revision_get(*, user: User, report_id: int, number: int) -> ReportRevision:
    report = report_get(user=user, report_id=report_id)
    try:
        return report.revisions.get(number=number)
    except ReportRevision.DoesNotExist:
        raise Http404("No such revision.") from None


def report_latest_revision(*, report: Report) -> ReportRevision:
    revision = report.revisions.order_by("-number").first()
    assert revision is not None, "a report is stored with its certified revision"
    return revision


def certificate_authority_list() -> QuerySet[CertificateAuthority]:
    """Every root the portal ever had, newest first: public, so that anyone can check a report."""
    return CertificateAuthority.objects.order_by("-id")


def certificate_authority_get(*, authority_id: int) -> CertificateAuthority:
    try:
        return certificate_authority_list().get(pk=authority_id)
    except CertificateAuthority.DoesNotExist:
        raise Http404("No such certificate authority.") from None


def trust_roots() -> list[x509.Certificate]:
    pems = certificate_authority_list().values_list("certificate_pem", flat=True)
    return [signing.load_certificate(pem) for pem in pems]


@dataclass(frozen=True)
class StoredMatch:
    """The stored report revision a file is, or (``exact`` False) the one it starts with."""

    report_id: int
    title: str
    subject: str
    revision: int
    latest_revision: int
    exact: bool
    # The review request whose decision the report records, and that decision (None, "": made before
    # reports were linked to requests).
    review_request_id: int | None = None
    request_outcome: str = ""

    @property
    def is_latest(self) -> bool:
        return self.revision == self.latest_revision


@dataclass(frozen=True)
class ReportVerification:
    pdf: PdfVerification
    match: StoredMatch | None

    @property
    def problems(self) -> list[str]:
        found = list(self.pdf.problems)
        match = self.match
        if self.pdf.error is not None:
            return found
        if match is None:
            found.append("the file is not a report this portal issued: no stored report has its SHA-256")
        elif not match.exact:
            found.append(
                f"the file starts with revision {match.revision} of report #{match.report_id}, but bytes were "
                "added after it that the portal did not store"
            )
        elif not match.is_latest:
            found.append(
                f"the file is revision {match.revision} of report #{match.report_id}; the portal holds a newer "
                f"revision {match.latest_revision} with more signatures"
            )
        return found

    @property
    def ok(self) -> bool:
        return not self.problems


def report_verify(*, data: bytes) -> ReportVerification:
    """Every signature of ``data`` checked against all the portal's roots (old ones included, no
    network), within the bounds the settings give (REPORT_VERIFY_*: a file past one is answered
    "not verified", never checked at length), and the stored report revision it is, or starts with."""
    pdf = verify_pdf_bounded(data, trust_roots=trust_roots(), bounds=verify_bounds())
    match = _match(pdf.sha256, exact=True)
    if match is None:
        # Newest signature first: the longest stored prefix of the file.
        for check in reversed(pdf.signatures):
            if not check.signed_sha256:
                continue
            match = _match(check.signed_sha256, exact=False)
            if match is not None:
                break
    return ReportVerification(pdf=pdf, match=match)


def verify_bounds() -> Bounds:
    return Bounds(
        max_signatures=settings.REPORT_VERIFY_MAX_SIGNATURES,
        max_revisions=settings.REPORT_VERIFY_MAX_REVISIONS,
        cpu_seconds=settings.REPORT_VERIFY_CPU_SECONDS,
        memory_bytes=settings.REPORT_VERIFY_MAX_MEMORY_BYTES,
    )


def _match(sha256: str, *, exact: bool) -> StoredMatch | None:
    revision = ReportRevision.objects.filter(sha256=sha256).select_related("report").first()
    if revision is None:
        return None
    latest = report_latest_revision(report=revision.report)
    return StoredMatch(
        report_id=revision.report_id,
        title=revision.report.title,
        subject=revision.report.subject_label,
        revision=revision.number,
        latest_revision=latest.number,
        exact=exact,
        review_request_id=revision.report.review_request_id,
        request_outcome=revision.report.request_outcome,
    )
