from __future__ import annotations

import json
from typing import Any

from django import forms
from django.http import QueryDict
from django.test import RequestFactory

from auditportal.fairness.errors import UserError
from auditportal.fairness.files.tabular import DatasetError
from auditportal.lib.forms import add_user_error, form_failed_redirect, form_failed_restore


class NameForm(forms.Form):
    name = forms.CharField()
    file = forms.FileField()


def _form() -> NameForm:
    form = NameForm(data={"name": "x"})
    form.is_valid()
    return form


def test_a_user_error_lands_on_the_field_it_names() -> None:
    form = _form()
    add_user_error(form, UserError("Dataset name 'x' is not allowed.", field="name"))
    assert form.errors["name"] == ["Dataset name 'x' is not allowed."]
    assert form.non_field_errors() == []


def test_a_user_error_without_a_field_of_the_form_is_shown_above_it() -> None:
    form = _form()
    add_user_error(form, UserError("Experiment 3 is completed; nothing to cancel."))
    add_user_error(form, UserError("pick a smaller tolerance", field="tolerance"))
    assert form.non_field_errors() == ["Experiment 3 is completed; nothing to cancel.", "pick a smaller tolerance"]
    assert "name" not in form.errors


def test_a_file_error_keeps_its_file_row_and_column_in_the_text() -> None:
    form = _form()
    add_user_error(form, DatasetError("value 7 is not a 0/1 prediction", file="scores.csv", row=3, column="pred"))
    assert form.non_field_errors() == ["scores.csv, row 3, column 'pred': value 7 is not a 0/1 prediction"]


# -- a failed form, kept for its page ------------------------------------------------------------


class SignedForm(forms.Form):
    reason = forms.CharField()
    password = forms.CharField(widget=forms.PasswordInput)
    keys = forms.MultipleChoiceField(choices=[("a", "a"), ("b", "b")], required=False)


def _request(path: str, session: dict[str, Any]) -> Any:
    request = RequestFactory().get(path)
    request.session = session  # type: ignore[assignment]  # a dict does what the helpers ask of a session
    return request


def test_a_failed_form_goes_back_to_its_page_with_its_data_and_errors_but_not_its_password() -> None:
    session: dict[str, Any] = {}
    posted = QueryDict(mutable=True)
    posted.update({"reason": "", "password": "hunter2", "csrfmiddlewaretoken": "t"})
    posted.setlist("keys", ["a", "b"])
    form = SignedForm(posted)
    assert not form.is_valid()
    add_user_error(form, UserError("The page changed: reload it."))
    response = form_failed_redirect(_request("/x/vote/", session), url="/x/", name="vote", form=form, anchor="#vote")
    assert (response.status_code, response["Location"]) == (303, "/x/#vote")
    assert "hunter2" not in json.dumps(session)
    assert form_failed_restore(_request("/y/", session)) is None  # another page: not its form
    failed = form_failed_restore(_request("/x/", session))
    assert failed is not None
    assert (failed.name, failed.error) == ("vote", None)
    assert failed.data.getlist("keys") == ["a", "b"]
    assert "password" not in failed.data
    assert "csrfmiddlewaretoken" not in failed.data
    shown = failed.bind(SignedForm(failed.data))
    assert shown.errors["reason"] == ["This field is required."]
    assert shown.non_field_errors() == ["The page changed: reload it."]
    assert shown["reason"].value() == ""
    assert form_failed_restore(_request("/x/", session)) is None  # once


def test_a_refusal_without_a_form_is_kept_as_its_message() -> None:
    session: dict[str, Any] = {}
    form_failed_redirect(_request("/x/submit/", session), url="/x/", name="submit", error="It is submitted.")
    failed = form_failed_restore(_request("/x/", session))
    assert failed is not None
    assert (failed.name, failed.error, dict(failed.data)) == ("submit", "It is submitted.", {})
