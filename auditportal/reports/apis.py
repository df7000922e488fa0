from __future__ import annotations

from typing import Any

from django.http import FileResponse, Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.models import User
from auditportal.accounts.permissions import request_user
from auditportal.fairness.documents.report_context import REPORT_STATES
from auditportal.fairness.errors import UserError
from auditportal.lib.params import as_id
from auditportal.lib.rest import DefaultPagination, FileContentNegotiation, SessionAuthentication
from auditportal.lib.uploads import accepts_uploads
from auditportal.monitoring import selectors as monitoring_selectors
from auditportal.reports import rules, selectors, services
from auditportal.reports.forms import too_large
from auditportal.reports.models import Report, RevisionKind
from auditportal.reports.presentation import report_as_json, verification_json
from auditportal.reports.services import REQUEST_OUTCOMES
from auditportal.reports.throttling import ReportVerifyThrottle
from auditportal.reports.views import revision_response


class _FileSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    sha256 = serializers.CharField()
    size = serializers.IntegerField()


class _SignatureSerializer(serializers.Serializer[Any]):
    field = serializers.CharField()
    signer = serializers.CharField(allow_blank=True)
    role = serializers.CharField(allow_blank=True)
    organisation = serializers.CharField(allow_blank=True)
    signed_at = serializers.CharField(allow_null=True, help_text="YYYY-MM-DD HH:MM:SS UTC")
    certification = serializers.BooleanField()
    intact = serializers.BooleanField()
    valid = serializers.BooleanField()
    trusted = serializers.BooleanField(
        allow_null=True,
        help_text="whether the signer's certificate chains to a portal authority; null when not judged: the "
        "signed bytes were changed (digest mismatch) or cannot be read",
    )
    modified_after = serializers.BooleanField()
    modification = serializers.CharField(allow_blank=True)
    modification_allowed = serializers.BooleanField()
    signed_sha256 = serializers.CharField(allow_blank=True)
    certificate_sha256 = serializers.CharField(allow_blank=True)
    ok = serializers.BooleanField()
    problems = serializers.ListField(child=serializers.CharField())


class _ThrottledSerializer(serializers.Serializer[Any]):
    detail = serializers.CharField(help_text="how many seconds until the next verification is allowed")


class _ReportMatchSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    title = serializers.CharField()
    subject = serializers.CharField()
    revision = serializers.IntegerField()
    latest_revision = serializers.IntegerField()
    exact = serializers.BooleanField()
    review_request = serializers.IntegerField(allow_null=True)
    decision = serializers.CharField(allow_null=True)


@accepts_uploads(rules.can_verify, who="a member of the portal")
class ReportVerifyApi(APIView):
    """POST a PDF as ``file``: the same checks as the verify page and ``manage.py verify_report``.

    200 with ``ok`` false when a check fails (the file was verified; it did not pass), or when the file
    was not verified (``error``: not a readable PDF, more signatures or revisions than a report can
    have, or a check past its time or memory limit); 400 when no file came or it is too large; 429 past
    REPORT_VERIFY_PER_HOUR verifications an hour (the page's count too)."""

    parser_classes = [MultiPartParser, FormParser]
    throttle_classes = [ReportVerifyThrottle]

    class InputSerializer(serializers.Serializer[Any]):
        file = serializers.FileField()

    class OutputSerializer(serializers.Serializer[Any]):
        ok = serializers.BooleanField()
        file = _FileSerializer()
        error = serializers.CharField(
            allow_null=True,
            help_text="why the file was not verified: not a readable PDF, more signatures or revisions than a "
            "report can have, or its check took too long",
        )
        signatures = _SignatureSerializer(many=True)
        report = _ReportMatchSerializer(allow_null=True, help_text="the portal's report these bytes are")
        problems = serializers.ListField(child=serializers.CharField())

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={
            200: OutputSerializer,
            429: OpenApiResponse(
                _ThrottledSerializer, description="More verifications than REPORT_VERIFY_PER_HOUR in the last hour."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        user = request_user(request)
        if not rules.can_verify(user):
            raise exceptions.PermissionDenied(f"{rules.VERIFY_REFUSED}.")
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        uploaded = serializer.validated_data["file"]
        error = too_large(uploaded.name, uploaded.size)
        if error:
            raise exceptions.ValidationError({"file": [error]})
        data = b"".join(uploaded.chunks())
        return Response(verification_json(selectors.report_verify(data=data), file_name=uploaded.name))


# ------------------------------------------------------------------------------ reports, for pipelines


class _PeriodSerializer(serializers.Serializer[Any]):
    to = serializers.DateTimeField(help_text="the period's end (excluded)")
    vars()["from"] = serializers.DateTimeField(help_text="the period's start (included)")


class _ReportSerializer(serializers.Serializer[Any]):
    """A signed report (presentation.report_as_json)."""

    id = serializers.IntegerField()
    title = serializers.CharField()
    subject = serializers.CharField(help_text="what was audited: the prediction audit's file or the trial")
    model = serializers.CharField(
        allow_null=True, help_text="the model identifier its review request names; null without a request"
    )
    review_request = serializers.IntegerField(allow_null=True, help_text="the review request whose decision it records")
    decision = serializers.ChoiceField(choices=REQUEST_OUTCOMES, allow_null=True)
    deployment = serializers.CharField(
        allow_null=True, help_text="a monitoring report's deployment; null for a review request's report"
    )
    period = _PeriodSerializer(allow_null=True, help_text="a monitoring report's period [from, to), UTC; else null")
    state = serializers.ChoiceField(
        choices=REPORT_STATES,
        help_text="awaiting_signatures until every signatory has signed (each signature is a new revision); signed "
        "then, or at once when it names none",
    )
    created_at = serializers.DateTimeField()
    latest_revision = serializers.IntegerField(help_text="the number of the newest revision: the one to archive")
    sha256 = serializers.CharField(help_text="the SHA-256 of the newest revision's PDF")
    url = serializers.CharField(help_text="this report in the API")
    pdf_url = serializers.CharField(help_text="the newest revision's PDF")
    page_url = serializers.CharField(help_text="the report's page")


class _SignatorySerializer(serializers.Serializer[Any]):
    username = serializers.CharField()
    name = serializers.CharField()
    role = serializers.CharField()
    signed = serializers.BooleanField()
    signed_at = serializers.DateTimeField(allow_null=True)
    revision = serializers.IntegerField(allow_null=True, help_text="the revision their signature made")


class _RevisionSerializer(serializers.Serializer[Any]):
    number = serializers.IntegerField(help_text="1: certified by the organisation; each later one adds a signature")
    # Not an enum in the schema: "kind" names the documents' kinds there (DocumentKind).
    kind = serializers.CharField(help_text=f"one of {', '.join(RevisionKind.values)}")
    signer = serializers.CharField(allow_null=True, help_text="the member who signed it; null: the organisation")
    sha256 = serializers.CharField()
    size_bytes = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    pdf_url = serializers.CharField()


class _ReportRecordSerializer(_ReportSerializer):
    """A signed report with who must sign it, who has, and every revision."""

    pages = serializers.IntegerField()
    signatories = _SignatorySerializer(many=True, help_text="who must sign, in the report's order, and who has")
    revisions = _RevisionSerializer(many=True, help_text="oldest first; the newest is the report")


class ReportListApi(APIView):
    """The reports this account may read, newest first; every member reads every report."""

    pagination_class = DefaultPagination

    @extend_schema(
        parameters=[
            OpenApiParameter("request", int, description="only the reports of this review request"),
            OpenApiParameter("model", str, description="only the reports of review requests naming this model"),
            OpenApiParameter("state", str, enum=REPORT_STATES, description="only reports in this signing state"),
            OpenApiParameter("deployment", str, description="only the monitoring reports of this deployment"),
        ],
        responses=_ReportSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        raw_request = params.get("request") or None
        review_request_id = as_id(raw_request) if raw_request is not None else None
        if raw_request is not None and not review_request_id:
            raise UserError(f"The request is a review request's number, not {raw_request[:40]!r}.", field="request")
        reports = selectors.report_list(
            user=request_user(request),
            review_request_id=review_request_id,
            model=params.get("model") or None,
            state=params.get("state") or None,
            deployment=params.get("deployment") or None,
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(reports, request, view=self)
        return paginator.get_paginated_response([report_as_json(report) for report in page or []])


class ReportDetailApi(APIView):
    @extend_schema(responses=_ReportRecordSerializer)
    def get(self, request: Request, report_id: int) -> Response:
        report = selectors.report_get(user=request_user(request), report_id=report_id)
        return Response(report_as_json(report, detail=True))


class ReportPdfApi(APIView):
    """A revision's stored PDF, byte for byte: the newest, or ``?revision=N``."""

    renderer_classes = [JSONRenderer]  # for errors; the file is the PDF whatever the client accepts
    content_negotiation_class = FileContentNegotiation

    @extend_schema(
        parameters=[
            OpenApiParameter("revision", int, description="this revision (1: the certified file); the newest without"),
            OpenApiParameter(
                "X-Content-SHA256",
                str,
                OpenApiParameter.HEADER,
                response=[200],
                description="the SHA-256 of the PDF bytes, as the report's revisions list it",
            ),
        ],
        responses={
            (200, "application/pdf"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="The stored PDF bytes exactly (their SHA-256 also in the X-Content-SHA256 header), as an "
                "attachment named after the review request, its decision and the revision.",
            )
        },
    )
    def get(self, request: Request, report_id: int) -> FileResponse:
        report = selectors.report_get(user=request_user(request), report_id=report_id)
        raw = request.query_params.get("revision")
        if raw is None or raw == "":
            return revision_response(selectors.report_latest_revision(report=report))
        number = as_id(raw)
        if not number:
            raise UserError(f"The revision is a number from 1, not {raw[:40]!r}.", field="revision")
        revision = report.revisions.filter(number=number).first()
        if revision is None:
            latest = selectors.report_latest_revision(report=report)
            raise exceptions.NotFound(
                f"Report #{report.pk} has no revision {number}: its revisions are 1 to {latest.number}."
            )
        return revision_response(revision)


class ReportSignApi(APIView):
    """A committee member named among the report's signatories signs it with their password, as on the
    report's page: the same re-authentication as votes (a wrong password is refused and recorded, and
    counts toward the lock), in their own session only (a token is refused: it cannot sign for a person).

    Synchronous: the answer is the report with the new revision, already stored; its ``sha256`` is the
    signed file's, and ``state`` becomes ``signed`` with the last signatory's signature."""

    class InputSerializer(serializers.Serializer[Any]):
        password = serializers.CharField(allow_blank=True, trim_whitespace=False, write_only=True)

    @extend_schema(request=InputSerializer, responses=_ReportRecordSerializer)
    def post(self, request: Request, report_id: int) -> Response:
        if not isinstance(request.successful_authenticator, SessionAuthentication):
            raise exceptions.PermissionDenied(rules.SIGN_NEEDS_SESSION)
        user = request_user(request)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        report = selectors.report_get(user=user, report_id=report_id)
        services.report_sign_member(report=report, member=user, password=serializer.validated_data["password"])
        return Response(report_as_json(_refetched(user, report), detail=True))


def _refetched(user: User, report: Report) -> Report:
    # Its revisions again (prefetched before the new one was stored).
    return selectors.report_get(user=user, report_id=report.pk)


class DeploymentReportCreateApi(APIView):
    """The certified monitoring report of the deployment over ``[from, to)`` (administrators,
    ethics-committee members, reviewers; docs/monitoring.md, "Monitoring reports"): 201 with the report
    made now, 200 with the one made before for the same period (one per deployment and period, never
    regenerated). A period without batches makes a report saying so. 400 naming the field when ``from``
    is not before ``to`` or ``to`` has not passed; 404 for an unknown deployment.

    Synchronous, as signing is: the answer comes with the stored, certified PDF (``pdf_url``)."""

    class InputSerializer(serializers.Serializer[Any]):
        to = serializers.DateTimeField(help_text="the period's end, excluded; must have passed (ISO 8601)")
        vars()["from"] = serializers.DateTimeField(help_text="the period's start, included (ISO 8601)")

    @extend_schema(
        request=InputSerializer,
        responses={
            201: OpenApiResponse(_ReportRecordSerializer, description="The report, made now."),
            200: OpenApiResponse(_ReportRecordSerializer, description="The period's report, made before."),
        },
    )
    def post(self, request: Request, name: str) -> Response:
        user = request_user(request)
        try:
            deployment = monitoring_selectors.deployment_get(user=user, name=name)
        except Http404 as exc:
            raise exceptions.NotFound(str(exc)) from None
        rules.check_request_monitoring_report(user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        report, created = services.monitoring_report_generate(
            actor=user,
            deployment=deployment,
            start=serializer.validated_data["from"],
            end=serializer.validated_data["to"],
        )
        return Response(
            report_as_json(_refetched(user, report), detail=True),
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )
