from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS
from django.http import HttpRequest, HttpResponseRedirect, QueryDict

from auditportal.fairness.errors import UserError
from auditportal.lib.http import see_other


def add_user_error(form: forms.Form, error: UserError) -> None:
    """Show a service's ``UserError`` on the form: on its field when the form has one of that name,
    otherwise above the form. The text is the whole message (a file error names file, row, column)."""
    form.add_error(error.field if error.field in form.fields else None, str(error))


# -- a failed form, shown again on its page --------------------------------------------------------
#
# A page whose forms post to sub-URLs (the request page's vote, waiver, comment... forms) answers a
# form that fails with a redirect (303) back to the page, so the address bar stays on the page and a
# reload does not post again. What was posted (never a password) and the errors wait in the session
# for that page's next GET, which binds the form again with them: form_failed_redirect, then
# form_failed_restore and FailedForm.bind in the page's view.

_SESSION_KEY: Final = "lib.forms.failed"
F = TypeVar("F", bound=forms.Form)
# A form's posted values kept at most (the rest is dropped: what a page's form posts is far less).
_MAX_VALUES: Final = 500
_MAX_VALUE_LENGTH: Final = 20_000


@dataclass
class FailedForm:
    """A form that failed on its way to its page: which (``name``), what was posted (passwords left
    out), its errors per field (``__all__``: above the form), and ``error``: a message for a page
    action without a form."""

    name: str
    data: QueryDict
    errors: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None

    def bind(self, form: F) -> F:
        """``form``, made with ``data=self.data``, with the errors it had: validated again, and the
        errors that validation alone does not give back (a service's refusal) added."""
        form.full_clean()
        for name, messages in self.errors.items():
            field = name if name in form.fields else None
            have = [str(message) for message in form.errors.get(name if field else NON_FIELD_ERRORS) or []]
            for message in messages:
                if message not in have:
                    form.add_error(field, message)
        return form


def form_failed_redirect(
    request: HttpRequest,
    *,
    url: str,
    name: str,
    form: forms.Form | None = None,
    error: str | None = None,
    anchor: str = "",
) -> HttpResponseRedirect:
    """Keep ``form`` (its data without password fields, and its errors) or ``error`` for the page at
    ``url`` (a path), and redirect there (303, to ``anchor``)."""
    data: dict[str, list[str]] = {}
    errors: dict[str, list[str]] = {}
    if form is not None:
        secret = {bound.html_name for bound in form if isinstance(bound.field.widget, forms.PasswordInput)}
        posted = form.data
        for key in list(posted)[:_MAX_VALUES]:
            if key in secret or key == "csrfmiddlewaretoken":
                continue
            values = posted.getlist(key) if isinstance(posted, QueryDict) else _as_list(posted[key])
            data[key] = [str(value)[:_MAX_VALUE_LENGTH] for value in values[:_MAX_VALUES]]
        errors = {name: [str(message) for message in messages] for name, messages in form.errors.items()}
    kept = dict(request.session.get(_SESSION_KEY) or {})
    kept[url] = {"name": name, "data": data, "errors": errors, "error": error}
    request.session[_SESSION_KEY] = kept
    return see_other(url + anchor)


def form_failed_restore(request: HttpRequest) -> FailedForm | None:
    """The form that failed on its way to this page, once (it leaves the session); None if none."""
    kept = request.session.get(_SESSION_KEY)
    if not kept or request.path not in kept:
        return None
    kept = dict(kept)
    stored = kept.pop(request.path)
    request.session[_SESSION_KEY] = kept
    data = QueryDict(mutable=True)
    for key, values in (stored.get("data") or {}).items():
        data.setlist(key, list(values))
    data._mutable = False
    return FailedForm(
        name=str(stored.get("name") or ""), data=data, errors=stored.get("errors") or {}, error=stored.get("error")
    )


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]
