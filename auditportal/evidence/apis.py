from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.urls import reverse
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.evidence import selectors
from auditportal.evidence.models import VerdictDocument
from auditportal.evidence.views import canonical_response


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


class VerdictDocumentDetailApi(APIView):
    def get(self, request: Request, document_id: int) -> Response:
        document = selectors.verdict_document_get(user=request_user(request), document_id=document_id)
        return Response(document_as_json(document))


class VerdictDocumentCanonicalApi(APIView):
    def get(self, request: Request, document_id: int) -> HttpResponse:
        document = selectors.verdict_document_get(user=request_user(request), document_id=document_id)
        return canonical_response(document)
