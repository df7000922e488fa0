from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.audits.selectors import prediction_audit_get
from auditportal.comparisons import audit_services, rules, selectors, services, trial_services
from auditportal.comparisons.models import PairedComparison
from auditportal.evidence.refs import VerdictDocumentRefSerializer, document_refs
from auditportal.experiments.selectors import trial_get
from auditportal.fairness.statistics import paired, stats
from auditportal.fairness.statistics.paired_file import PairedSpec
from auditportal.lib.rest import DefaultPagination, open_component, refuse_rejected_upload
from auditportal.lib.uploads import accepts_uploads, received_sha256

_VERDICT = serializers.ChoiceField(choices=paired.VERDICT_CHOICES, allow_null=True)


@open_component
class _ModelSerializer(serializers.Serializer[Any]):
    """One model: its column (a file's), or its name (``trial 5 (...)``, ``audit 12 (...)``) and what it was
    taken from (a trial's reference, or an audit's, below)."""

    column = serializers.CharField()
    threshold = serializers.FloatField(allow_null=True)
    audit = serializers.IntegerField(required=False, help_text="two audits: the model's audit")
    prediction = serializers.CharField(
        required=False, allow_null=True, help_text="two audits: the audit's 0/1 prediction column"
    )
    score = serializers.CharField(
        required=False, allow_null=True, help_text="two audits: the audit's score column (at threshold)"
    )
    thresholds = serializers.DictField(
        required=False, help_text="two audits: a frozen what-if's group thresholds (attribute, groups)"
    )
    audit_sha256 = serializers.CharField(required=False, help_text="two audits: the file's SHA-256 the audit recorded")
    document = serializers.DictField(
        required=False, allow_null=True, help_text="two audits: the audit's verdict document (id, sha256)"
    )


@open_component
class _PairedAttributeSerializer(serializers.Serializer[Any]):
    groups = serializers.ListField(child=serializers.CharField(allow_blank=True))
    unknown = serializers.IntegerField()
    metrics = serializers.DictField(
        child=serializers.DictField(),
        help_text="per metric (tpr, fpr, fnr, selection_rate, accuracy): its name, direction, denominator and, "
        "per group, each model's rate with its interval, the paired table, the difference B - A with its "
        "interval and level, McNemar's p-value (raw and Holm-adjusted), the verdict and the rows needed",
    )
    verdicts = serializers.DictField(child=_VERDICT, help_text="per group: the verdict over the metrics")
    verdict = _VERDICT


@open_component
class _PairedDocumentSerializer(serializers.Serializer[Any]):
    """A stored paired comparison: champion (A) against challenger (B) on the same rows (docs/comparisons.md)."""

    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField()
    schema_version = serializers.IntegerField()
    file = serializers.DictField()
    rows = serializers.IntegerField()
    champion = _ModelSerializer()
    challenger = _ModelSerializer()
    output = serializers.ChoiceField(
        choices=["prediction", "score", "mixed"],
        help_text="what both models' columns hold; mixed: one audit took 0/1 predictions, the other scores",
    )
    agreement = serializers.FloatField(allow_null=True, help_text="the share of rows where A and B agree")
    tolerance = serializers.FloatField()
    alpha = serializers.FloatField()
    power = serializers.FloatField()
    metrics = serializers.ListField(child=serializers.CharField())
    methods = serializers.DictField(child=serializers.CharField())
    policy = serializers.DictField(required=False)
    verdict = _VERDICT
    attributes = serializers.DictField(child=_PairedAttributeSerializer(), help_text="keyed by the attribute")
    documents = VerdictDocumentRefSerializer(
        many=True,
        help_text="the comparison's frozen verdict document (docs/verdict-documents.md), for a review request",
    )
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field, not Field.source
        choices=["file", "trials", "audits"],
        help_text="one file, two trials' checkpoints, or two audits of the same file (given again)",
    )
    state = serializers.ChoiceField(
        choices=["done", "pending", "failed"], help_text="two trials are compared by a worker: pending until then"
    )
    error = serializers.CharField(allow_blank=True, help_text="why a pending comparison failed")


def _document(comparison: PairedComparison) -> dict[str, Any]:
    return {
        "id": comparison.pk,
        "created_at": comparison.created_at.isoformat(),
        "created_by": comparison.created_by.username,
        **comparison.result,
        "documents": document_refs(comparison.verdict_documents.order_by("id")),
        "source": comparison.source,
        "state": comparison.state,
        "error": comparison.error,
    }


# Fields of other inputs a file comparison is sometimes sent, and where they go instead.
_NOT_A_FILE_FIELD = {
    "champion_audit": "two prediction audits are compared through POST /api/v1/comparisons/audits/ "
    "(multipart: champion_audit, challenger_audit and the file both audited, given again).",
    "champion_trial": "two trials are compared through POST /api/v1/comparisons/trials/ "
    '({"champion_trial": id, "challenger_trial": id}).',
}
_NOT_A_FILE_FIELD["challenger_audit"] = _NOT_A_FILE_FIELD["champion_audit"]
_NOT_A_FILE_FIELD["challenger_trial"] = _NOT_A_FILE_FIELD["champion_trial"]


def _refuse_other_inputs(data: Any) -> None:
    for field, message in _NOT_A_FILE_FIELD.items():
        if field in data:
            raise exceptions.ValidationError({field: [message]})


@accepts_uploads(rules.can_create, who="an ML engineer or a reviewer")
class ComparisonListCreateApi(APIView):
    """GET: the paired comparisons this account may see. POST: compare two models' predictions in an
    uploaded file (``multipart/form-data``; ML engineers and reviewers); the policy sets tolerance and alpha."""

    parser_classes = [MultiPartParser, FormParser]
    pagination_class = DefaultPagination

    class InputSerializer(serializers.Serializer[Any]):
        file = serializers.FileField(allow_empty_file=True)
        label = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.label
        positive = serializers.CharField(default="1")
        champion = serializers.CharField(allow_blank=True, help_text="the model in production (A): its column")
        challenger = serializers.CharField(
            required=False, allow_blank=True, default="", help_text="the model that would replace it (B)"
        )
        output = serializers.ChoiceField(choices=["prediction", "score"], default="prediction")
        champion_threshold = serializers.FloatField(required=False, allow_null=True, default=None)
        challenger_threshold = serializers.FloatField(required=False, allow_null=True, default=None)
        attributes = serializers.ListField(child=serializers.CharField(), allow_empty=False)
        metrics = serializers.ListField(
            child=serializers.ChoiceField(choices=paired.METRICS), required=False, default=list(paired.METRICS)
        )
        unknown_tokens = serializers.ListField(
            child=serializers.CharField(allow_blank=True), required=False, allow_empty=True
        )
        power = serializers.FloatField(default=stats.DEFAULT_POWER)

    class OutputSerializer(serializers.Serializer[Any]):
        id = serializers.IntegerField()
        original_name = serializers.CharField()
        sha256 = serializers.CharField()
        num_rows = serializers.IntegerField()
        champion = serializers.CharField()
        challenger = serializers.CharField()
        verdict = serializers.CharField(allow_blank=True, help_text="the worst group's verdict; blank: none")
        created_by = serializers.CharField(source="created_by.username")
        created_at = serializers.DateTimeField()

    @extend_schema(responses=OutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        user = request_user(request)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(selectors.comparison_list(user=user), request, view=self) or []
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)

    @extend_schema(request={"multipart/form-data": InputSerializer}, responses={201: _PairedDocumentSerializer})
    def post(self, request: Request) -> Response:
        user = request_user(request)
        rules.check_create(user)
        _refuse_other_inputs(request.data)
        serializer = self.InputSerializer(data=request.data)
        refuse_rejected_upload(request)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        spec = PairedSpec.from_input(
            label=data["label"],
            positive=data["positive"],
            attributes=data["attributes"],
            champion=data["champion"],
            challenger=data["challenger"],
            output=data["output"],
            champion_threshold=data["champion_threshold"],
            challenger_threshold=data["challenger_threshold"],
            unknown_tokens=data.get("unknown_tokens"),
            power=data["power"],
            metrics=data["metrics"],
        )
        spec = dataclasses.replace(spec, max_groups=settings.DATASET_MAX_GROUPS)
        uploaded = data["file"]
        comparison = services.comparison_create(
            user=user,
            source=Path(uploaded.temporary_file_path()),
            original_name=uploaded.name,
            spec=spec,
            sha256=received_sha256(uploaded),
            web=True,
        )
        return Response(_document(comparison), status=201)


class ComparisonDetailApi(APIView):
    @extend_schema(responses=_PairedDocumentSerializer)
    def get(self, request: Request, comparison_id: int) -> Response:
        comparison = selectors.comparison_get(user=request_user(request), comparison_id=comparison_id)
        return Response(_document(comparison))


class ComparisonTrialsCreateApi(APIView):
    """POST: compare two completed trials validated on the same dataset version, row by row on their shared
    validation split (ML engineers and reviewers). A worker runs both checkpoints: the answer (202) is the
    pending comparison; GET /api/v1/comparisons/<id>/ shows it done (with its document) or failed (why)."""

    class InputSerializer(serializers.Serializer[Any]):
        champion_trial = serializers.IntegerField(help_text="the trial whose model is in production (A)")
        challenger_trial = serializers.IntegerField(help_text="the trial whose model would replace it (B)")
        power = serializers.FloatField(default=stats.DEFAULT_POWER)

    class OutputSerializer(serializers.Serializer[Any]):
        id = serializers.IntegerField()
        state = serializers.CharField()
        champion = serializers.CharField()
        challenger = serializers.CharField()
        sha256 = serializers.CharField(help_text="the dataset version's SHA-256")

    @extend_schema(request=InputSerializer, responses={202: OutputSerializer})
    def post(self, request: Request) -> Response:
        user = request_user(request)
        rules.check_create(user)
        for field in ("champion_audit", "challenger_audit"):
            # A body that is not an object (a bare number, a list) is the serializer's to refuse.
            if isinstance(request.data, Mapping) and field in request.data:
                raise exceptions.ValidationError({field: [_NOT_A_FILE_FIELD[field]]})
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        comparison = trial_services.comparison_request_trials(
            user=user,
            champion=trial_get(user=user, trial_id=data["champion_trial"]),
            challenger=trial_get(user=user, trial_id=data["challenger_trial"]),
            power=data["power"],
        )
        return Response(self.OutputSerializer(comparison).data, status=202)


@accepts_uploads(rules.can_create, who="an ML engineer or a reviewer")
class ComparisonAuditsCreateApi(APIView):
    """POST: compare the models of two prediction audits of the same file, row by row (ML engineers and
    reviewers). An audit keeps per-group counts, not rows, so the file is sent again
    (``multipart/form-data``): its SHA-256 must be both audits'. Each model's predictions are taken as its
    audit took them (label, prediction or score column and threshold, attributes, positive value), and
    each model's counts must equal its audit's; the policy in force sets tolerance and alpha."""

    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer[Any]):
        file = serializers.FileField(
            allow_empty_file=True,
            help_text="the file both audits audited, byte for byte",
            error_messages={"required": "send the file both audits audited: an audit does not keep it"},
        )
        champion_audit = serializers.IntegerField(
            help_text="the audit of the model in production (A)",
            error_messages={"required": "name the champion's audit: a paired comparison needs two audits"},
        )
        challenger_audit = serializers.IntegerField(
            help_text="the audit of the model that would replace it (B), of the same file",
            error_messages={"required": "name the challenger's audit: a paired comparison needs two audits"},
        )
        metrics = serializers.ListField(
            child=serializers.ChoiceField(choices=paired.METRICS), required=False, default=list(paired.METRICS)
        )
        power = serializers.FloatField(default=stats.DEFAULT_POWER)

    @extend_schema(request={"multipart/form-data": InputSerializer}, responses={201: _PairedDocumentSerializer})
    def post(self, request: Request) -> Response:
        user = request_user(request)
        rules.check_create(user)
        serializer = self.InputSerializer(data=request.data)
        refuse_rejected_upload(request)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        uploaded = data["file"]
        comparison = audit_services.comparison_create_from_audits(
            user=user,
            champion=prediction_audit_get(user=user, audit_id=data["champion_audit"]),
            challenger=prediction_audit_get(user=user, audit_id=data["challenger_audit"]),
            source=Path(uploaded.temporary_file_path()),
            original_name=uploaded.name,
            sha256=received_sha256(uploaded),
            power=data["power"],
            metrics=data["metrics"],
            web=True,
        )
        return Response(_document(comparison), status=201)
