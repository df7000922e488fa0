from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.models import User
from auditportal.accounts.permissions import request_user
from auditportal.audits import rules, selectors, services
from auditportal.audits.models import PredictionAudit, QueuedPredictionAudit, QueuedStatus, WhatIf
from auditportal.evidence.refs import VerdictDocumentRefSerializer, document_refs
from auditportal.evidence.selectors import verdict_document_search, verdict_documents_by_audit
from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics import stats, whatif
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.fairness.statistics.stats import Verdict
from auditportal.lib.rest import DefaultPagination, open_component, refuse_rejected_upload
from auditportal.lib.uploads import accepts_uploads, received_sha256

# The stored audit document, docs/audit-json.md (schema version 2; version 1 documents lack the keys
# that are not required). The document's objects are open: keys may be added within a version.
_VERDICT = serializers.ChoiceField(choices=Verdict.choices(), allow_null=True)


@open_component
class _AuditFileSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    format = serializers.ChoiceField(choices=["csv", "parquet"])
    sha256 = serializers.CharField()
    size_bytes = serializers.IntegerField()


@open_component
class _AuditLabelSerializer(serializers.Serializer[Any]):
    column = serializers.CharField()
    positive = serializers.CharField()
    positives = serializers.IntegerField()
    negatives = serializers.IntegerField()


@open_component
class _AuditPredictionSerializer(serializers.Serializer[Any]):
    column = serializers.CharField(allow_null=True)
    score = serializers.CharField(allow_null=True)
    threshold = serializers.FloatField(allow_null=True)
    predicted_positives = serializers.IntegerField()


@open_component
class _AuditPolicySerializer(serializers.Serializer[Any]):
    version = serializers.IntegerField()
    tolerance = serializers.FloatField()
    alpha = serializers.FloatField()
    metrics = serializers.ListField(child=serializers.CharField())
    reference_rule = serializers.CharField()
    min_group_size = serializers.IntegerField(allow_null=True)


@open_component
class _HeadlineFailSerializer(serializers.Serializer[Any]):
    attribute = serializers.CharField()
    metric = serializers.CharField()
    group = serializers.CharField()
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    ci_level = serializers.FloatField(allow_null=True)


@open_component
class _HeadlineSerializer(serializers.Serializer[Any]):
    verdict = serializers.ChoiceField(choices=Verdict.choices(), allow_null=True)
    alpha = serializers.FloatField()
    families = serializers.IntegerField()
    level = serializers.FloatField(allow_null=True)
    rule = serializers.CharField()
    fails = _HeadlineFailSerializer(many=True)


@open_component
class _AuditGroupSerializer(serializers.Serializer[Any]):
    n = serializers.IntegerField()
    positives = serializers.IntegerField()
    negatives = serializers.IntegerField()
    predicted_positives = serializers.IntegerField()
    tp = serializers.IntegerField()
    fn = serializers.IntegerField()
    fp = serializers.IntegerField()
    tn = serializers.IntegerField()
    tpr = serializers.FloatField(allow_null=True)
    fpr = serializers.FloatField(allow_null=True)
    fnr = serializers.FloatField(allow_null=True)
    ppv = serializers.FloatField(allow_null=True)
    selection_rate = serializers.FloatField(allow_null=True)
    ci = serializers.DictField(
        child=serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2, allow_null=True),
        allow_null=True,
        help_text="per rate, [low, high] at 1 - alpha; null when the rate is undefined",
    )
    undefined = serializers.ListField(child=serializers.CharField())
    values = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)


@open_component
class _AuditComparisonSerializer(serializers.Serializer[Any]):
    metric = serializers.CharField()
    group = serializers.CharField(allow_blank=True)
    reference = serializers.CharField(allow_blank=True)
    difference = serializers.FloatField(allow_null=True)
    ratio = serializers.FloatField(allow_null=True)
    ratio_low = serializers.FloatField(allow_null=True, required=False)
    ratio_high = serializers.FloatField(allow_null=True, required=False)
    ratio_verdict = serializers.ChoiceField(choices=Verdict.choices(), allow_null=True, required=False)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    ci_level = serializers.FloatField(allow_null=True)
    verdict = serializers.ChoiceField(choices=Verdict.choices())
    judged = serializers.BooleanField(required=False)
    positives_needed = serializers.IntegerField(allow_null=True)
    note = serializers.CharField(allow_null=True, required=False)


@open_component
class _AuditAttributeSerializer(serializers.Serializer[Any]):
    columns = serializers.ListField(child=serializers.CharField(), required=False)
    reference = serializers.CharField(allow_null=True, allow_blank=True)
    unknown = serializers.IntegerField()
    groups = serializers.DictField(child=_AuditGroupSerializer(), help_text="keyed by the group's key")
    comparisons = _AuditComparisonSerializer(many=True)
    summary = serializers.DictField(child=serializers.DictField(), help_text="per metric: spread over the groups")
    verdict = serializers.ChoiceField(choices=Verdict.choices(), allow_null=True)
    verdicts = serializers.DictField(child=serializers.IntegerField(), help_text="judged comparisons per verdict")


_DOCUMENTS_HELP = "the audit's verdict documents, newest first: the one frozen when it was made"


class _RetirementSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField()
    by = serializers.CharField(allow_null=True)
    reason = serializers.CharField()


@open_component
class _AuditResultSerializer(serializers.Serializer[Any]):
    """An audit document (docs/audit-json.md): what an audit, or a what-if at some thresholds, judged."""

    schema_version = serializers.IntegerField()
    file = _AuditFileSerializer()
    rows = serializers.IntegerField()
    label = _AuditLabelSerializer()  # type: ignore[assignment]  # a field, not Field.label
    prediction = _AuditPredictionSerializer()
    unknown_tokens = serializers.ListField(child=serializers.CharField(allow_blank=True))
    tolerance = serializers.FloatField()
    alpha = serializers.FloatField()
    policy = _AuditPolicySerializer(required=False)
    power = serializers.FloatField(required=False)
    verdict = serializers.ChoiceField(choices=Verdict.choices(), allow_null=True)
    headline = _HeadlineSerializer(required=False)
    levels = serializers.DictField(child=serializers.CharField(), required=False)
    warnings = serializers.ListField(child=serializers.CharField(), required=False)
    attributes = serializers.DictField(child=_AuditAttributeSerializer(), help_text="keyed by the attribute's key")


@open_component
class _AuditDocumentSerializer(_AuditResultSerializer):
    """A stored prediction audit: the document it was judged as (docs/audit-json.md), with its id, when
    it was stored, whether it was retired since and the verdict document frozen with it."""

    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    retired = _RetirementSerializer(allow_null=True)
    documents = VerdictDocumentRefSerializer(many=True, help_text=_DOCUMENTS_HELP)


def _retirement(audit: PredictionAudit) -> dict[str, Any] | None:
    if audit.retired_at is None:
        return None
    return {
        "at": audit.retired_at.isoformat(),
        "by": audit.retired_by.username if audit.retired_by else None,
        "reason": audit.retired_reason,
    }


def _document(audit: PredictionAudit, *, user: User) -> dict[str, Any]:
    # The stored document is what was judged; whether it was retired later, and the verdict document
    # frozen from it, are said beside it.
    documents = document_refs(verdict_document_search(user=user, audit=audit.pk))
    return {
        "id": audit.pk,
        "created_at": audit.created_at.isoformat(),
        "retired": _retirement(audit),
        "documents": documents,
        **audit.result,
    }


class QueuedAuditOutputSerializer(serializers.Serializer[Any]):
    """A prediction audit of a large file that a worker runs (202 of the POST, and its status)."""

    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=QueuedStatus.choices)
    original_name = serializers.CharField()
    size_bytes = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_blank=True, help_text="why it failed (status failed); blank otherwise")
    audit = serializers.IntegerField(
        source="audit_id", allow_null=True, help_text="the stored audit's id once done; null before"
    )
    status_url = serializers.CharField(help_text="poll this until the status is done or failed")
    audit_url = serializers.CharField(allow_null=True, help_text="the stored audit (its document) once done")
    documents = VerdictDocumentRefSerializer(
        many=True, help_text="the stored audit's verdict documents once done; empty before"
    )


def _queued(queued: QueuedPredictionAudit, *, user: User) -> dict[str, Any]:
    values = {
        field: getattr(queued, field)
        for field in ("id", "status", "original_name", "size_bytes", "created_at", "started_at", "finished_at", "error")
    }
    values["audit_id"] = queued.audit_id
    values["status_url"] = reverse("api-prediction-audit-queued", args=[queued.pk])
    values["audit_url"] = reverse("api-prediction-audit", args=[queued.audit_id]) if queued.audit_id else None
    values["documents"] = (
        document_refs(verdict_document_search(user=user, audit=queued.audit_id)) if queued.audit_id else []
    )
    data: dict[str, Any] = QueuedAuditOutputSerializer(values).data
    return data


@accepts_uploads(rules.can_run, who="an ML engineer or a reviewer")
class PredictionAuditListCreateApi(APIView):
    """GET: the prediction audits this account may see. POST: audit an uploaded prediction file
    (``multipart/form-data``; ML engineers and reviewers); the policy sets tolerance and alpha."""

    parser_classes = [MultiPartParser, FormParser]
    pagination_class = DefaultPagination

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
        verdict = serializers.CharField(allow_blank=True, help_text="the headline verdict; blank: none")
        attributes = serializers.ListField(child=serializers.CharField(), source="attribute_names")
        created_by = serializers.CharField(source="created_by.username")
        created_at = serializers.DateTimeField()
        retired_at = serializers.DateTimeField(allow_null=True)
        documents = serializers.SerializerMethodField(help_text=_DOCUMENTS_HELP)

        @extend_schema_field(VerdictDocumentRefSerializer(many=True))
        def get_documents(self, audit: PredictionAudit) -> list[dict[str, Any]]:
            # Read for the whole page at once (the view's context), not once per audit.
            return document_refs(self.context["documents"][audit.pk])

    @extend_schema(responses=OutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        user = request_user(request)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(selectors.prediction_audit_list(user=user), request, view=self) or []
        documents = verdict_documents_by_audit(user=user, audit_ids=[audit.pk for audit in page])
        rows = self.OutputSerializer(page, many=True, context={"documents": documents}).data
        return paginator.get_paginated_response(rows)

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={201: _AuditDocumentSerializer, 202: QueuedAuditOutputSerializer},
        description=(
            "A file up to AUDIT_INLINE_MAX_SIZE (and, for Parquet, AUDIT_INLINE_MAX_ROWS rows) is audited "
            "at once: 201 with the audit's document. A larger one is kept and audited by a worker: 202 with "
            "its status (and a Location header) at status_url, to poll until done (audit_url then names "
            "the audit) or failed (error says why)."
        ),
    )
    def post(self, request: Request) -> Response:
        user = request_user(request)
        rules.check_run(user)
        # The fairness policy sets these; a client that sends them would believe it had.
        services.refuse_policy_parameters(list(request.data))
        serializer = self.InputSerializer(data=request.data)
        refuse_rejected_upload(request)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        spec = _spec_of(data)
        uploaded = data["file"]
        outcome = services.prediction_audit_submit(
            user=user,
            source=Path(uploaded.temporary_file_path()),
            original_name=uploaded.name,
            spec=spec,
            sha256=received_sha256(uploaded),
        )
        if isinstance(outcome, QueuedPredictionAudit):
            body = _queued(outcome, user=user)
            return Response(body, status=202, headers={"Location": body["status_url"]})
        return Response(_document(outcome, user=user), status=201)


class QueuedPredictionAuditApi(APIView):
    """The status of a large file's audit, for the account that queued it (404 for others)."""

    @extend_schema(responses=QueuedAuditOutputSerializer)
    def get(self, request: Request, queued_id: str) -> Response:
        queued = selectors.queued_prediction_audit_get(user=request_user(request), queued_id=str(queued_id))
        return Response(_queued(queued, user=request_user(request)))


class PredictionAuditDetailApi(APIView):
    @extend_schema(responses=_AuditDocumentSerializer)
    def get(self, request: Request, audit_id: int) -> Response:
        user = request_user(request)
        audit = selectors.prediction_audit_get(user=user, audit_id=audit_id)
        return Response(_document(audit, user=user))


class PredictionAuditRetireApi(APIView):
    class InputSerializer(serializers.Serializer[Any]):
        # Blank allowed here so that the service words the error, as on the page.
        reason = serializers.CharField(allow_blank=True, trim_whitespace=False, default="")

    @extend_schema(request=InputSerializer, responses=_AuditDocumentSerializer)
    def post(self, request: Request, audit_id: int) -> Response:
        user = request_user(request)
        audit = selectors.prediction_audit_get(user=user, audit_id=audit_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        audit = services.prediction_audit_retire(user=user, audit=audit, reason=serializer.validated_data["reason"])
        return Response(_document(audit, user=user))


# ---------------------------------------------------------------------------------------- what-if

_THRESHOLD_PARAMETERS = [
    OpenApiParameter(
        "threshold",
        float,
        description="the global threshold: rows whose score is at least it are predicted positive (default: the "
        "threshold the what-if started at)",
    ),
    OpenApiParameter(
        "threshold[ATTRIBUTE=GROUP]",
        float,
        description="a group's own threshold, e.g. threshold[gender=f]=0.42; any number of groups, all of one "
        "attribute (or of the intersection, keyed as in the document: threshold[gender&age=f&young]). Rows "
        "of an unknown group take the global threshold",
    ),
]


class _ThresholdsSerializer(serializers.Serializer[Any]):
    threshold = serializers.FloatField()
    attribute = serializers.CharField(allow_null=True)
    groups = serializers.DictField(child=serializers.FloatField())


class _AccuracySerializer(serializers.Serializer[Any]):
    overall = serializers.FloatField(allow_null=True)
    correct = serializers.IntegerField()
    groups = serializers.DictField(
        child=serializers.DictField(child=serializers.FloatField(allow_null=True)),
        help_text="per attribute, per group: (tp + tn) / n",
    )


class WhatIfOutputSerializer(serializers.Serializer[Any]):
    """A what-if and, once prepared, its judgement at the thresholds asked for (exploratory: nothing
    is stored; freeze it to make an audit)."""

    id = serializers.IntegerField()
    exploratory = serializers.BooleanField(help_text="always true: a what-if is no audit until it is frozen")
    status = serializers.ChoiceField(choices=QueuedStatus.choices)
    error = serializers.CharField(allow_blank=True)
    original_name = serializers.CharField()
    sha256 = serializers.CharField(allow_blank=True, help_text="of the scored file")
    prepared_sha256 = serializers.CharField(allow_blank=True, help_text="of the stored sorted scores")
    num_rows = serializers.IntegerField(allow_null=True)
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    attributes = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField(allow_blank=True)),
        help_text="per attribute key (the intersection too): its groups' keys",
    )
    thresholds = _ThresholdsSerializer(allow_null=True)
    accuracy = _AccuracySerializer(allow_null=True)
    document = _AuditResultSerializer(allow_null=True, help_text="the audit document at these thresholds")


def _whatif(item: WhatIf, answer: dict[str, Any] | None, thresholds: Any) -> dict[str, Any]:
    prepared = item.prepared
    attributes: dict[str, list[str]] = {}
    if item.is_ready:
        loaded = selectors.whatif_load(item=item)
        attributes = {key: list(loaded.groups_of(key)) for key in loaded.attribute_keys}
    return {
        "id": item.pk,
        "exploratory": True,
        "status": item.status,
        "error": item.error,
        "original_name": item.original_name,
        "sha256": item.sha256,
        "prepared_sha256": item.prepared_sha256,
        "num_rows": item.num_rows if prepared else None,
        "created_by": item.created_by.username,
        "created_at": item.created_at.isoformat(),
        "attributes": attributes,
        "thresholds": None if thresholds is None else thresholds.as_json(),
        "accuracy": None if answer is None else answer["accuracy"],
        "document": None if answer is None else answer["document"],
    }


def whatif_thresholds(request: Request, item: WhatIf) -> whatif.Thresholds:
    loaded = selectors.whatif_load(item=item)
    return whatif.thresholds_from_query(
        _pairs(request.query_params),
        attribute_keys=loaded.attribute_keys,
        default=float(loaded.spec.threshold or 0.5),
    )


def _pairs(query: Any) -> list[tuple[str, str]]:
    return [(key, value) for key, values in query.lists() for value in values]


@accepts_uploads(rules.can_run, who="an ML engineer or a reviewer")
class WhatIfCreateApi(APIView):
    """POST: start a what-if from an uploaded scored file (``multipart/form-data``; the audit's fields,
    a score column required). A small file is prepared at once (201); a large one by a worker (202),
    whose status the what-if's GET gives."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": PredictionAuditListCreateApi.InputSerializer},
        responses={201: WhatIfOutputSerializer, 202: WhatIfOutputSerializer},
    )
    def post(self, request: Request) -> Response:
        user = request_user(request)
        rules.check_run(user)
        services.refuse_policy_parameters(list(request.data))
        serializer = PredictionAuditListCreateApi.InputSerializer(data=request.data)
        refuse_rejected_upload(request)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        spec = _spec_of(data)
        uploaded = data["file"]
        started = services.whatif_start(
            user=user,
            source=Path(uploaded.temporary_file_path()),
            original_name=uploaded.name,
            spec=spec,
            sha256=received_sha256(uploaded),
        )
        if not started.is_ready:
            url = reverse("api-whatif", args=[started.pk])
            return Response(_whatif(started, None, None), status=202, headers={"Location": url})
        thresholds = whatif.Thresholds(threshold=float(spec.threshold if spec.threshold is not None else 0.5))
        answer = selectors.whatif_answer(item=started, thresholds=thresholds)
        return Response(_whatif(started, answer, thresholds), status=201)


class WhatIfApi(APIView):
    """The what-if judged at the thresholds in the query: every metric, interval and verdict of the
    audit document, and the accuracy. Exploratory: nothing is stored."""

    @extend_schema(parameters=_THRESHOLD_PARAMETERS, responses=WhatIfOutputSerializer)
    def get(self, request: Request, whatif_id: int) -> Response:
        item = selectors.whatif_get(user=request_user(request), whatif_id=whatif_id)
        if not item.is_ready:
            return Response(_whatif(item, None, None))
        thresholds = whatif_thresholds(request, item)
        answer = selectors.whatif_answer(item=item, thresholds=thresholds)
        return Response(_whatif(item, answer, thresholds))


class WhatIfSuggestionOutputSerializer(serializers.Serializer[Any]):
    attribute = serializers.CharField()
    thresholds = _ThresholdsSerializer()
    tolerance = serializers.FloatField()
    gap_before = serializers.FloatField(allow_null=True, help_text="max - min TPR at the starting threshold")
    gap_after = serializers.FloatField(allow_null=True)
    accuracy_before = serializers.FloatField()
    accuracy_after = serializers.FloatField()
    accuracy_cost = serializers.FloatField()
    reached = serializers.BooleanField()
    tpr = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="per group with rows (of the intersection: its combinations with rows), at the suggested thresholds",
    )
    coarse = serializers.ListField(
        child=serializers.CharField(),
        help_text="groups with fewer than 1/tolerance label positives: their TPR moves in steps wider than the "
        "tolerance, so they limit the levels every group can share (small intersection groups)",
    )
    kept = serializers.ListField(
        child=serializers.CharField(), help_text="groups without label positives: kept at the global threshold"
    )
    method = serializers.CharField()


class WhatIfSuggestionApi(APIView):
    """Per group of one attribute, or of the intersection (its key, as in the document), deterministic
    thresholds that bring the equal-opportunity (TPR) gap within the policy's tolerance at the smallest
    loss of accuracy, with that cost."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "attribute", str, description="an attribute, or the intersection's key (default: the first attribute)"
            )
        ],
        responses=WhatIfSuggestionOutputSerializer,
    )
    def get(self, request: Request, whatif_id: int) -> Response:
        item = selectors.whatif_get(user=request_user(request), whatif_id=whatif_id)
        if not item.is_ready:
            raise UserError("This what-if is not prepared yet.")
        suggestion = selectors.whatif_suggestion(item=item, attribute=request.query_params.get("attribute") or None)
        return Response(suggestion)


class WhatIfFreezeApi(APIView):
    """Freeze the what-if at the thresholds in the query (as for the GET) into a real prediction audit
    and its verdict document; 201 with the audit's document."""

    @extend_schema(parameters=_THRESHOLD_PARAMETERS, request=None, responses={201: _AuditDocumentSerializer})
    def post(self, request: Request, whatif_id: int) -> Response:
        user = request_user(request)
        item = selectors.whatif_get(user=user, whatif_id=whatif_id)
        rules.check_run(user)
        if not item.is_ready:
            raise UserError("This what-if is not prepared yet.")
        audit = services.whatif_freeze(user=user, item=item, thresholds=whatif_thresholds(request, item))
        return Response(_document(audit, user=user), status=201)


def _spec_of(data: dict[str, Any]) -> AuditSpec:
    """The audit spec an upload's validated fields ask for (an audit, or a what-if's starting point)."""
    return AuditSpec.from_input(
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
