from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from auditportal.accounts.permissions import request_user
from auditportal.fairness.documents.monitoring_report import MonitoringReportContext
from auditportal.fairness.documents.report_context import ReportContext
from auditportal.fairness.errors import UserError
from auditportal.lib.downloads import content_disposition
from auditportal.lib.forms import add_user_error, form_failed_redirect, form_failed_restore
from auditportal.lib.uploads import accepts_uploads
from auditportal.monitoring import selectors as monitoring_selectors
from auditportal.reports import rules, selectors, services
from auditportal.reports.forms import MonitoringReportForm, SignForm, VerifyForm
from auditportal.reports.models import Report, ReportRevision
from auditportal.reports.presentation import revision_file_names, verification_json
from auditportal.reports.throttling import verify_wait


@login_required
def report_list(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    return render(
        request, "reports/list.html", {"reports": selectors.report_list(user=user), "is_member": rules.can_view(user)}
    )


def _detail(request: HttpRequest, report: Report, form: SignForm | None = None) -> HttpResponse:
    user = request_user(request)
    context: ReportContext | MonitoringReportContext = (
        MonitoringReportContext.from_json(report.context)
        if report.is_monitoring
        else ReportContext.from_json(report.context)
    )
    revisions = list(report.revisions.select_related("signer", "certificate").order_by("number"))
    signed_by = {revision.signer.get_username(): revision for revision in revisions if revision.signer is not None}
    signatories = [{"person": person, "revision": signed_by.get(person.key)} for person in context.signatories]
    may_sign = rules.can_sign(user, report) and user.get_username() not in signed_by
    failed = form_failed_restore(request)
    if form is None and failed is not None and failed.name == "sign":
        form = failed.bind(SignForm(failed.data))
    return render(
        request,
        "reports/detail.html",
        {
            "report": report,
            "context": context,
            "revisions": revisions,
            "latest": revisions[-1],
            "signatories": signatories,
            "sign_form": form or (SignForm() if may_sign else None),
        },
    )


@login_required
def report_detail(request: HttpRequest, report_id: int) -> HttpResponse:
    return _detail(request, selectors.report_get(user=request_user(request), report_id=report_id))


@login_required
def report_revision_download(request: HttpRequest, report_id: int, number: int) -> FileResponse:
    revision = selectors.report_revision_get(user=request_user(request), report_id=report_id, number=number)
    return revision_response(revision)


def revision_response(revision: ReportRevision) -> FileResponse:
    """The stored bytes of ``revision`` (checked against their SHA-256, also in X-Content-SHA256), as an
    attachment named after its report (the page's download and the API's)."""
    data = services.report_file(revision=revision)
    response = FileResponse(iter([data]), content_type="application/pdf")
    name, fallback = revision_file_names(revision.report, revision.number)
    response["Content-Disposition"] = content_disposition(name, fallback=fallback)
    response["X-Content-SHA256"] = revision.sha256
    return response


@login_required
@require_POST
def report_sign(request: HttpRequest, report_id: int) -> HttpResponse:
    user = request_user(request)
    report = selectors.report_get(user=user, report_id=report_id)
    form = SignForm(request.POST)
    if form.is_valid():
        try:
            revision = services.report_sign_member(report=report, member=user, password=form.cleaned_data["password"])
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(
                request, f"You signed report #{report.pk}: revision {revision.number}, SHA-256 {revision.sha256}."
            )
            return redirect("reports:detail", report_id=report.pk)
    # Back to the report's page (303), the error shown there and the password not kept: the address bar
    # never rests on the POST-only signing URL.
    return form_failed_redirect(
        request, url=reverse("reports:detail", kwargs={"report_id": report.pk}), name="sign", form=form,
        anchor="#sign-form",
    )  # fmt: skip


# The service's UserError names the API's fields; the form's are start and end.
_PERIOD_FIELDS = {"from": "start", "to": "end"}


@login_required
@require_http_methods(["GET", "POST"])
def deployment_reports(request: HttpRequest, name: str) -> HttpResponse:
    """A deployment's monitoring reports, and (administrators, committee members, reviewers) the form
    that asks for one: /monitoring/<name>/-/reports/ (docs/monitoring.md, "Monitoring reports")."""
    user = request_user(request)
    deployment = monitoring_selectors.deployment_get(user=user, name=name)
    may_request = rules.can_request_monitoring_report(user)
    form = MonitoringReportForm(request.POST) if request.method == "POST" else MonitoringReportForm()
    status = 200
    if request.method == "POST":
        rules.check_request_monitoring_report(user)
        if form.is_valid():
            try:
                report, created = services.monitoring_report_generate(
                    actor=user,
                    deployment=deployment,
                    start=form.cleaned_data["start"],
                    end=form.cleaned_data["end"],
                )
            except UserError as exc:
                form.add_error(_PERIOD_FIELDS.get(exc.field or ""), str(exc))
            else:
                messages.success(
                    request,
                    f"Monitoring report #{report.pk} {'made' if created else 'was made before for this period'}: "
                    f"{report.subject_label}.",
                )
                return redirect("reports:detail", report_id=report.pk)
        status = 400
    return render(
        request,
        "reports/deployment_reports.html",
        {
            "deployment": deployment,
            "reports": selectors.deployment_reports(user=user, deployment=deployment),
            "form": form if may_request else None,
        },
        status=status,
    )


@accepts_uploads(rules.can_verify, who="a member of the portal")
@login_required
@require_http_methods(["GET", "POST"])
def report_verify(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    if not rules.can_verify(user):
        raise PermissionDenied(f"{rules.VERIFY_REFUSED}; anyone can with the CA certificate.")
    form = VerifyForm(request.POST, request.FILES) if request.method == "POST" else VerifyForm()
    result = None
    status = 200
    if request.method == "POST" and form.is_valid():
        wait = verify_wait(request)
        if wait is not None:
            form.add_error(
                None,
                f"You have verified {settings.REPORT_VERIFY_PER_HOUR} files in the last hour, the most allowed "
                f"(REPORT_VERIFY_PER_HOUR); try again in {wait} s.",
            )
            status = 429
        else:
            uploaded = form.cleaned_data["file"]
            data = b"".join(uploaded.chunks())
            result = verification_json(selectors.report_verify(data=data), file_name=uploaded.name)
    if form.errors and status == 200:
        status = 400
    return render(
        request,
        "reports/verify.html",
        {"form": form, "result": result, "authorities": selectors.certificate_authority_list()},
        status=status,
    )


def certificate_authority_list(request: HttpRequest) -> HttpResponse:
    """Public: a third party needs the certificates to check a report with their own tools."""
    return render(request, "reports/authorities.html", {"authorities": selectors.certificate_authority_list()})


def certificate_authority_pem(request: HttpRequest, authority_id: int) -> HttpResponse:
    authority = selectors.certificate_authority_get(authority_id=authority_id)
    response = HttpResponse(authority.certificate_pem, content_type="application/x-pem-file")
    response["Content-Disposition"] = f'attachment; filename="portal-report-ca-{authority.pk}.pem"'
    return response
