"""Text that must fit its column, checked before it is written.

PostgreSQL refuses a value longer than a column's max_length (a DataError, a server error at the
end of a request); SQLite stores it anyway. Services check what users typed with ``fit_column``, so
both answer with the same ``UserError`` naming the field.
"""

from __future__ import annotations

from django.db import models

from auditportal.fairness.errors import UserError


def fit_column(model: type[models.Model], column: str, value: str, *, field: str | None = None) -> str:
    """``value`` unchanged, or a ``UserError`` on ``field`` (default: the column's name) when it is
    longer than ``model.column`` allows."""
    max_length = getattr(model._meta.get_field(column), "max_length", None)
    if max_length is not None and len(value) > max_length:
        name = field or column
        raise UserError(
            f"The {name.replace('_', ' ')} is longer than {max_length} characters ({len(value)}): shorten it.",
            field=name,
        )
    return value
