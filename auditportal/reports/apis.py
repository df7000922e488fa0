from __future__ import annotations

from typing import Any

from rest_framework import exceptions, serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.lib.uploads import accepts_uploads
from auditportal.reports import selectors
from auditportal.reports.forms import too_large
from auditportal.reports.presentation import verification_json


@accepts_uploads(lambda user: user.is_member, who="a member of the portal")
class ReportVerifyApi(APIView):
    """POST a PDF as ``file``: the same checks as the verify page and ``manage.py verify_report``.

    200 with ``ok`` false when a check fails (the file was verified; it did not pass); 400 when no
    file came or it is too large."""

    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer[Any]):
        file = serializers.FileField()

    def post(self, request: Request) -> Response:
        user = request_user(request)
        if not user.is_member:
            raise exceptions.PermissionDenied("Only members of the portal can verify reports here.")
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        uploaded = serializer.validated_data["file"]
        error = too_large(uploaded.name, uploaded.size)
        if error:
            raise exceptions.ValidationError({"file": [error]})
        data = b"".join(uploaded.chunks())
        return Response(verification_json(selectors.report_verify(data=data), file_name=uploaded.name))
