from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from rest_framework import exceptions, serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.api.pagination import DefaultPagination
from auditportal.audits import selectors, services
from auditportal.audits.models import PredictionAudit
from auditportal.fairness import stats
from auditportal.fairness.audit import AuditSpec
from auditportal.lib.env import human_size
from auditportal.lib.uploads import RejectedUpload, accepts_uploads, received_sha256


def _retirement(audit: PredictionAudit) -> dict[str, Any] | None:
    if audit.retired_at is None:
        return None
    return {
        "at": audit.retired_at.isoformat(),
        "by": audit.retired_by.username if audit.retired_by else None,
        "reason": audit.retired_reason,
    }


def _document(audit: PredictionAudit) -> dict[str, Any]:
    # The stored document is what was judged; whether it was retired later is said beside it.
    return {"id": audit.pk, "created_at": audit.created_at.isoformat(), "retired": _retirement(audit), **audit.result}


@accepts_uploads(services.can_run_audits, who="an ML engineer or a reviewer")
class PredictionAuditListCreateApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer[Any]):
        file = serializers.FileField(allow_empty_file=True)
        label = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.label
        positive = serializers.CharField(default="1")
        prediction = serializers.CharField(required=False, allow_blank=True, default="")
        score = serializers.CharField(required=False, allow_blank=True, default="")
        threshold = serializers.FloatField(required=False, allow_null=True, default=None)
        attributes = serializers.ListField(child=serializers.CharField(), allow_empty=False)
        intersect = serializers.BooleanField(default=False)
        references = serializers.ListField(child=serializers.CharField(), required=False, default=list)
        unknown_tokens = serializers.ListField(
            child=serializers.CharField(allow_blank=True), required=False, allow_empty=True
        )
        power = serializers.FloatField(default=stats.DEFAULT_POWER)

    class OutputSerializer(serializers.Serializer[Any]):
        id = serializers.IntegerField()
        original_name = serializers.CharField()
        file_format = serializers.CharField()
        sha256 = serializers.CharField()
        size_bytes = serializers.IntegerField()
        num_rows = serializers.IntegerField()
        verdict = serializers.CharField(allow_blank=True)
        attributes = serializers.ListField(child=serializers.CharField(), source="attribute_names")
        created_by = serializers.CharField(source="created_by.username")
        created_at = serializers.DateTimeField()
        retired_at = serializers.DateTimeField(allow_null=True)

    def get(self, request: Request) -> Response:
        paginator = DefaultPagination()
        page = paginator.paginate_queryset(
            selectors.prediction_audit_list(user=request_user(request)), request, view=self
        )
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)

    def post(self, request: Request) -> Response:
        user = request_user(request)
        services.require_auditor(user)
        # The fairness policy sets these; a client that sends them would believe it had.
        services.refuse_policy_parameters(list(request.data))
        serializer = self.InputSerializer(data=request.data)
        rejected: list[RejectedUpload] = getattr(request._request, "rejected_uploads", [])
        if rejected:
            item = rejected[0]
            raise exceptions.ValidationError(
                {
                    "file": [
                        f"{item.file_name}: the file is larger than the {human_size(item.limit_bytes)} limit "
                        "(DATASET_MAX_UPLOAD_SIZE); nothing was stored."
                    ]
                }
            )
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        spec = AuditSpec.from_input(
            label=data["label"],
            positive=data["positive"],
            prediction=data["prediction"],
            score=data["score"],
            threshold=data["threshold"],
            attributes=data["attributes"],
            intersect=data["intersect"],
            references=data["references"],
            unknown_tokens=data.get("unknown_tokens"),
            power=data["power"],
            max_groups=settings.DATASET_MAX_GROUPS,
        )
        uploaded = data["file"]
        audit = services.prediction_audit_run(
            user=user,
            source=Path(uploaded.temporary_file_path()),
            original_name=uploaded.name,
            spec=spec,
            sha256=received_sha256(uploaded),
        )
        return Response(_document(audit), status=201)


class PredictionAuditDetailApi(APIView):
    def get(self, request: Request, audit_id: int) -> Response:
        audit = selectors.prediction_audit_get(user=request_user(request), audit_id=audit_id)
        return Response(_document(audit))


class PredictionAuditRetireApi(APIView):
    class InputSerializer(serializers.Serializer[Any]):
        # Blank allowed here so that the service words the error, as on the page.
        reason = serializers.CharField(allow_blank=True, trim_whitespace=False, default="")

    def post(self, request: Request, audit_id: int) -> Response:
        user = request_user(request)
        audit = selectors.prediction_audit_get(user=user, audit_id=audit_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        audit = services.prediction_audit_retire(user=user, audit=audit, reason=serializer.validated_data["reason"])
        return Response(_document(audit))
