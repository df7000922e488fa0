from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.evidence import selectors
from auditportal.evidence.models import DocumentKind, FreezeTrigger, VerdictDocument
from auditportal.evidence.refs import VerdictDocumentRefSerializer, document_ref
from auditportal.evidence.views import canonical_response
from auditportal.fairness.statistics.stats import Verdict
from auditportal.lib.params import MAX_ID
from auditportal.lib.rest import DefaultPagination, open_component


def document_as_json(document: VerdictDocument, *, content: bool = True) -> dict[str, Any]:
    """The document's metadata, its ref (evidence.refs) included, and with ``content`` the frozen
    document itself."""
    if document.prediction_audit_id is not None:
        subject: dict[str, Any] = {"type": "prediction_audit", "id": document.prediction_audit_id}
    elif document.paired_comparison_id is not None:
        subject = {"type": "paired_comparison", "id": document.paired_comparison_id}
    else:
        assert document.trial is not None
        subject = {
            "type": "trial",
            "id": document.trial_id,
            "number": document.trial.number,
            "experiment": document.trial.experiment_id,
        }
    body = {
        **document_ref(document),
        "kind": document.kind,
        "subject": subject,
        "step": document.step,
        "schema_version": document.schema_version,
        "policy_version": document.policy.version,
        "frozen_by": document.frozen_by.username if document.frozen_by else None,
        "frozen_at": document.frozen_at.isoformat(),
        "trigger": document.trigger,
        "canonical_url": reverse("api-verdict-document-canonical", args=[document.pk]),
    }
    if content:
        body["document"] = document.document
    return body


class _DocumentSubjectSerializer(serializers.Serializer[Any]):
    type = serializers.ChoiceField(choices=["prediction_audit", "trial", "paired_comparison"])
    id = serializers.IntegerField()
    number = serializers.IntegerField(required=False, help_text="trials only: the trial's number")
    experiment = serializers.IntegerField(required=False, help_text="trials only: the experiment's id")


@open_component
class _FrozenDocumentSerializer(serializers.Serializer[Any]):
    """The frozen document itself (docs/verdict-documents.md); keys may be added within a version."""

    schema_version = serializers.IntegerField()
    code_version = serializers.CharField()
    kind = serializers.ChoiceField(choices=DocumentKind.choices)
    policy = serializers.DictField()
    verdict = serializers.ChoiceField(choices=Verdict.choices(), allow_null=True)
    attributes = serializers.DictField(
        child=serializers.DictField(), required=False, help_text="trial validations; an audit's are in `audit`"
    )
    audit = serializers.DictField(required=False, help_text="prediction audits: the audit's document as stored")
    comparison = serializers.DictField(
        required=False, help_text="paired comparisons: the comparison's result as stored (docs/comparisons.md)"
    )


class VerdictDocumentListApi(APIView):
    """The verdict documents this account may read, newest first, filtered by subject, SHA-256, policy
    version or kind (every filter given must match); each without its content (GET its ``url``)."""

    pagination_class = DefaultPagination

    class FilterSerializer(serializers.Serializer[Any]):
        audit = serializers.IntegerField(
            required=False, min_value=1, max_value=MAX_ID, help_text="a prediction audit's id: its documents"
        )
        trial = serializers.IntegerField(
            required=False, min_value=1, max_value=MAX_ID, help_text="a trial's id: its validations' documents"
        )
        experiment = serializers.IntegerField(
            required=False, min_value=1, max_value=MAX_ID, help_text="an experiment's id: its trials' documents"
        )
        sha256 = serializers.RegexField(
            r"^[0-9a-fA-F]{64}$",
            required=False,
            help_text="the SHA-256 of a document's canonical bytes (64 hexadecimal digits)",
            error_messages={"invalid": "A SHA-256 is 64 hexadecimal digits."},
        )
        policy_version = serializers.IntegerField(
            required=False, min_value=1, max_value=2**31 - 1, help_text="judged under this fairness policy version"
        )
        kind = serializers.ChoiceField(choices=DocumentKind.choices, required=False)

    # What a list takes besides the filters: DefaultPagination's, and DRF's renderer choice.
    OTHER_PARAMETERS = frozenset({"page", "page_size", "format"})

    class OutputSerializer(VerdictDocumentRefSerializer):
        kind = serializers.ChoiceField(choices=DocumentKind.choices)
        subject = _DocumentSubjectSerializer()
        step = serializers.IntegerField(allow_null=True)
        schema_version = serializers.IntegerField()
        policy_version = serializers.IntegerField()
        frozen_by = serializers.CharField(allow_null=True)
        frozen_at = serializers.DateTimeField()
        trigger = serializers.ChoiceField(choices=FreezeTrigger.choices)
        canonical_url = serializers.CharField(help_text="the exact stored bytes, whose SHA-256 is sha256")

    @extend_schema(parameters=[FilterSerializer], responses=OutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        serializer = self.FilterSerializer(data=request.query_params)
        errors = {} if serializer.is_valid() else dict(serializer.errors)
        # A misspelt filter would list every document, and a pipeline would take the wrong one.
        names = list(serializer.fields)
        for name in sorted(set(request.query_params) - set(names) - self.OTHER_PARAMETERS)[:5]:
            errors[name[:40]] = [f"Not a filter of this list; the filters are {', '.join(names)}."]
        if errors:
            raise exceptions.ValidationError(errors)
        documents = selectors.verdict_document_search(user=request_user(request), **serializer.validated_data)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(documents, request, view=self) or []
        return paginator.get_paginated_response([document_as_json(document, content=False) for document in page])


class VerdictDocumentDetailApi(APIView):
    class OutputSerializer(VerdictDocumentListApi.OutputSerializer):
        document = _FrozenDocumentSerializer()

    @extend_schema(responses=OutputSerializer)
    def get(self, request: Request, document_id: int) -> Response:
        document = selectors.verdict_document_get(user=request_user(request), document_id=document_id)
        return Response(document_as_json(document))


class VerdictDocumentCanonicalApi(APIView):
    @extend_schema(
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="The stored canonical JSON bytes exactly (their SHA-256 is the document's, also "
                "in the X-Content-SHA256 header), as an attachment.",
            )
        }
    )
    def get(self, request: Request, document_id: int) -> HttpResponse:
        document = selectors.verdict_document_get(user=request_user(request), document_id=document_id)
        return canonical_response(document)
