from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from auditportal.accounts.permissions import request_user
from auditportal.evidence import presentation, selectors
from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.documents.plain import document_plain_summary


@login_required
def verdict_document_detail(request: HttpRequest, document_id: int) -> HttpResponse:
    document = selectors.verdict_document_get(user=request_user(request), document_id=document_id)
    value = document.document
    return render(
        request,
        "evidence/document.html",
        {
            "document": document,
            "value": value,
            "headline": document.headline,
            "plain_summary": document_plain_summary(value),
            "summaries": presentation.attribute_summaries(document, value),
            "pretty": presentation.pretty(value),
            "forest_plot": selectors.verdict_document_forest(document=document),
            "forest_references": selectors.verdict_document_references(document=document),
        },
    )


@login_required
def verdict_document_canonical(request: HttpRequest, document_id: int) -> HttpResponse:
    document = selectors.verdict_document_get(user=request_user(request), document_id=document_id)
    return canonical_response(document)


def canonical_response(document: VerdictDocument) -> HttpResponse:
    """The stored bytes exactly: their SHA-256 is the document's."""
    response = HttpResponse(document.canonical_bytes, content_type="application/json")
    response["Content-Disposition"] = (
        f'attachment; filename="verdict-document-{document.pk}-{document.short_hash}.json"'
    )
    response["X-Content-SHA256"] = document.sha256
    return response
