from __future__ import annotations

from typing import Any

from django import forms

from auditportal.activity.models import Verb


def _verb_choices() -> list[tuple[str, Any]]:
    """The verbs grouped by what they are about ("review_request.approved" under "Review request")."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for value, label in Verb.choices:
        groups.setdefault(value.split(".")[0].replace("_", " ").capitalize(), []).append((value, label))
    return [("", "Anything"), *groups.items()]


class EventSearchForm(forms.Form):
    """The log page's search, from the query string; a value that is not one is named on its field."""

    verb = forms.ChoiceField(label="What happened", required=False, choices=_verb_choices)
    actor = forms.CharField(label="Who", required=False, max_length=150, help_text='Part of a username, or "system".')
    text = forms.CharField(
        label="About",
        required=False,
        max_length=200,
        help_text='What the event is about: "review request 12", "#12", or a word of its details.',
    )
    since = forms.DateField(label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(label="To", required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", "The last day comes before the first.")
        return data
