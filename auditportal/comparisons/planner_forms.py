"""The A/B test planner's form: the plan's settings and one row per group (docs/planner.md)."""

from __future__ import annotations

import re
from typing import Any, Final

from django import forms

from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics import planning

ROWS: Final = 8  # group rows the page offers; the API takes up to planning.MAX_GROUPS
NAME_LENGTH: Final = 200
_GROUP_FIELD = re.compile(r"^groups\[(\d+)\]\.(\w+)$")


class PlanForm(forms.Form):
    difference = forms.FloatField(
        label="Smallest difference that matters",
        min_value=0,
        max_value=1,
        initial=0.05,
        help_text="Absolute, in the metric's rate: 0.05 is five percentage points between the arms.",
    )
    alpha = forms.FloatField(
        label="Alpha",
        min_value=0,
        max_value=1,
        help_text="Familywise over the groups (Bonferroni: each group's comparison at alpha / G).",
    )
    power = forms.FloatField(
        label="Power", min_value=0, max_value=1, initial=0.8, help_text="Each group's chance to decide."
    )
    ratio = forms.FloatField(
        label="Arm split",
        initial=1.0,
        min_value=1 / planning.MAX_RATIO,
        max_value=planning.MAX_RATIO,
        help_text="Challenger (B) predictions per champion (A) prediction; 1 is 1:1.",
    )
    unit = forms.ChoiceField(
        label="The metric counts",
        choices=[(unit, planning.UNIT_LABELS[unit]) for unit in planning.UNITS],
        initial="rows",
        help_text="Among label positives or negatives, each group's positive rate of labels is needed.",
    )


class GroupRowForm(forms.Form):
    name = forms.CharField(label="Group", max_length=NAME_LENGTH, required=False)
    share = forms.FloatField(label="Share of rows", required=False, min_value=0, max_value=1)
    rate = forms.FloatField(label="Base rate", required=False, min_value=0, max_value=1)
    prevalence = forms.FloatField(label="Positive rate of labels", required=False, min_value=0, max_value=1)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.is_blank(data):
            return data
        for name in ("name", "share", "rate"):
            if data.get(name) in (None, "") and name not in self.errors:
                self.add_error(name, "Enter a value, or clear the row.")
        return data

    @staticmethod
    def is_blank(data: dict[str, Any]) -> bool:
        return all(data.get(name) in (None, "") for name in ("name", "share", "rate", "prevalence"))


def group_formset(data: Any = None, *, initial: list[dict[str, Any]] | None = None) -> forms.BaseFormSet[GroupRowForm]:
    initial = (initial or [])[:ROWS]
    formset_class = forms.formset_factory(
        GroupRowForm, extra=ROWS - len(initial), max_num=ROWS, absolute_max=ROWS, validate_max=True
    )
    return formset_class(data, initial=initial or None, prefix="group")


def filled_rows(formset: forms.BaseFormSet[GroupRowForm]) -> list[tuple[GroupRowForm, planning.GroupInput]]:
    """The rows that are not blank, each with its form (for errors) and as the maths takes it."""
    rows = []
    for form in formset.forms:
        data = form.cleaned_data
        if GroupRowForm.is_blank(data):
            continue
        group = planning.GroupInput(
            name=data["name"], share=data["share"], rate=data["rate"], prevalence=data.get("prevalence")
        )
        rows.append((form, group))
    return rows


def add_plan_error(
    form: PlanForm,
    rows: list[tuple[GroupRowForm, planning.GroupInput]],
    formset: forms.BaseFormSet[GroupRowForm],
    error: UserError,
) -> None:
    """Show the maths' refusal where it belongs: ``groups[i].share`` on the i-th filled row's field,
    ``groups`` above the rows, the plan's own fields on the form."""
    field = error.field or ""
    match = _GROUP_FIELD.match(field)
    if match and int(match.group(1)) < len(rows):
        rows[int(match.group(1))][0].add_error(match.group(2), error.message)
    elif field == "groups" or field.startswith("groups"):
        formset.non_form_errors().append(error.message)  # the formset's own ErrorList, once cleaned
    else:
        form.add_error(field if field in form.fields else None, error.message)
