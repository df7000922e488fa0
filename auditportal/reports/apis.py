from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.lib.uploads import accepts_uploads
from auditportal.reports import rules, selectors
from auditportal.reports.forms import too_large
from auditportal.reports.presentation import verification_json
from auditportal.reports.throttling import ReportVerifyThrottle


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
