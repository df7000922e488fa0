from __future__ import annotations

from django import forms

from auditportal.fairness.errors import UserError
from auditportal.fairness.files.tabular import DatasetError
from auditportal.lib.forms import add_user_error


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
