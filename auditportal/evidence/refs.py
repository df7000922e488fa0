"""How an API answer names a verdict document: its id, its SHA-256 and the URL of its API detail.

Every answer that creates or names evidence (a prediction audit, a queued audit once done, a review
request, the documents' own list and detail) carries its documents as these refs, so that a pipeline
holding only an API token can pass the ids on (a review request's ``documents``) and check the bytes
(``GET url`` gives ``canonical_url``). A public module of evidence: the apps above build their
answers with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.urls import reverse
from rest_framework import serializers

from auditportal.evidence.models import VerdictDocument


def document_ref(document: VerdictDocument) -> dict[str, Any]:
    return {
        "id": document.pk,
        "sha256": document.sha256,
        "url": reverse("api-verdict-document", args=[document.pk]),
    }


def document_refs(documents: Iterable[VerdictDocument]) -> list[dict[str, Any]]:
    return [document_ref(document) for document in documents]


class VerdictDocumentRefSerializer(serializers.Serializer[Any]):
    """A verdict document named by an answer (docs/verdict-documents.md)."""

    id = serializers.IntegerField()
    sha256 = serializers.CharField(help_text="the SHA-256 of the document's canonical bytes")
    url = serializers.CharField(help_text="the document's API detail, GET /api/v1/documents/<id>/")
