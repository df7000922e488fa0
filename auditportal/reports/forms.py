from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from auditportal.fairness.text.sizes import human_size


class VerifyForm(forms.Form):
    file = forms.FileField(label="PDF report")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text = (
            f"A report downloaded from this portal, or a copy someone sent you; at most "
            f"{human_size(settings.REPORT_VERIFY_MAX_BYTES)}. It is checked, not kept. You may verify "
            f"{settings.REPORT_VERIFY_PER_HOUR} files an hour (here and through the API together)."
        )

    def clean_file(self) -> Any:
        uploaded = self.cleaned_data["file"]
        error = too_large(uploaded.name, uploaded.size)
        if error:
            raise forms.ValidationError(error)
        return uploaded


def too_large(name: str, size: int) -> str | None:
    """What the page and the API say about a file above REPORT_VERIFY_MAX_SIZE; None below it."""
    limit = settings.REPORT_VERIFY_MAX_BYTES
    if size <= limit:
        return None
    return f"{name}: the file is larger than the {human_size(limit)} limit (REPORT_VERIFY_MAX_SIZE)."


class SignForm(forms.Form):
    password = forms.CharField(
        label="Your password",
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text="Signing is your decision on the record: confirm it is you.",
    )


class MonitoringReportForm(forms.Form):
    """A deployment's period, UTC: the monitoring report's ``[from, to)`` (the service checks it)."""

    start = forms.DateTimeField(
        label="From (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": 1}, format="%Y-%m-%dT%H:%M:%S"),
        help_text="The period's start, included.",
    )
    end = forms.DateTimeField(
        label="To (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": 1}, format="%Y-%m-%dT%H:%M:%S"),
        help_text="The period's end, excluded; it must have passed.",
    )
