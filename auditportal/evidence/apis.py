from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.evidence import selectors
from auditportal.evidence.models import DocumentKind, FreezeTrigger, VerdictDocument
from auditportal.evidence.views import canonical_response
from auditportal.fairness.statistics.stats import Verdict
from auditportal.lib.rest import open_component


def document_as_json(document: VerdictDocument) -> dict[str, Any]:
    if document.prediction_audit_id is not None:
        subject: dict[str, Any] = {"type": "prediction_audit", "id": document.prediction_audit_id}
    else:
        assert document.trial is not None
        subject = {
            "type": "trial",
            "id": document.trial_id,
            "number": document.trial.number,
            "experiment": document.trial.experiment_id,
        }
    return {
        "id": document.pk,
        "kind": document.kind,
        "subject": subject,
        "step": document.step,
        "schema_version": document.schema_version,
        "sha256": document.sha256,
        "policy_version": document.policy.version,
        "frozen_by": document.frozen_by.username if document.frozen_by else None,
        "frozen_at": document.frozen_at.isoformat(),
        "trigger": document.trigger,
        "canonical_url": reverse("api-verdict-document-canonical", args=[document.pk]),
        "document": document.document,
    }


class _DocumentSubjectSerializer(serializers.Serializer[Any]):
    type = serializers.ChoiceField(choices=["prediction_audit", "trial"])
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


class VerdictDocumentDetailApi(APIView):
    class OutputSerializer(serializers.Serializer[Any]):
        id = serializers.IntegerField()
        kind = serializers.ChoiceField(choices=DocumentKind.choices)
        subject = _DocumentSubjectSerializer()
        step = serializers.IntegerField(allow_null=True)
        schema_version = serializers.IntegerField()
        sha256 = serializers.CharField()
        policy_version = serializers.IntegerField()
        frozen_by = serializers.CharField(allow_null=True)
        frozen_at = serializers.DateTimeField()
        trigger = serializers.ChoiceField(choices=FreezeTrigger.choices)
        canonical_url = serializers.CharField()
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
