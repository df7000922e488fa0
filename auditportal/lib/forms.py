from __future__ import annotations

from django import forms

from auditportal.fairness.errors import UserError


def add_user_error(form: forms.Form, error: UserError) -> None:
    """Show a service's ``UserError`` on the form: on its field when the form has one of that name,
    otherwise above the form. The text is the whole message (a file error names file, row, column)."""
    form.add_error(error.field if error.field in form.fields else None, str(error))
