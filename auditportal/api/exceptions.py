from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from auditportal.fairness.errors import UserError
from auditportal.fairness.files.tabular import DatasetError


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map domain errors raised by services to API errors with the same wording users see.

    Every ``UserError`` is a 400 ``{"detail": ..., "field": ...}``; a ``DatasetError`` adds the
    file, row and column at fault.
    """
    if isinstance(exc, UserError):
        body: dict[str, Any] = {"detail": str(exc), "field": exc.field}
        if isinstance(exc, DatasetError):
            body.update(file=exc.file, row=exc.row, column=exc.column)
        return Response(body, status=400)
    if isinstance(exc, ValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        exc = exceptions.ValidationError(detail=detail)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(detail=str(exc) or None)
    return drf_exception_handler(exc, context)
