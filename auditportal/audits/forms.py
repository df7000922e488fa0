from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from auditportal.fairness.files.tabular import DEFAULT_UNKNOWN_TOKENS
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.fairness.text.sizes import human_size


class PredictionAuditForm(forms.Form):
    file = forms.FileField(label="CSV or Parquet file of predictions", allow_empty_file=True)
    label = forms.CharField(max_length=255, label="Label column", help_text="The true binary outcome.")
    positive = forms.CharField(
        max_length=255,
        initial="1",
        label="Positive label value",
        help_text="The label value that counts as positive (e.g. 1, yes, approved).",
    )
    prediction = forms.CharField(
        max_length=255,
        required=False,
        label="Prediction column",
        help_text="The model's 0/1 decision (or the label's two values). Leave empty when giving a score.",
    )
    score = forms.CharField(
        max_length=255,
        required=False,
        label="Score column",
        help_text="Instead of a prediction: a numeric score, predicted positive when score ≥ threshold.",
    )
    threshold = forms.FloatField(required=False, label="Threshold", help_text="Needed with a score column.")
    attributes = forms.CharField(
        max_length=2000,
        label="Sensitive attribute columns",
        help_text="Comma-separated, e.g. gender, age_group; with a CSV file chosen, tick its columns below.",
    )
    intersect = forms.BooleanField(
        required=False, label="Also audit the intersection of the attributes (e.g. gender&age_group)."
    )
    reference = forms.CharField(
        max_length=2000,
        required=False,
        label="Reference groups",
        help_text="Optional, comma-separated GROUP or ATTRIBUTE=GROUP. Default: each attribute's largest group.",
    )
    unknown_tokens = forms.CharField(
        required=False,
        initial=", ".join(token for token in DEFAULT_UNKNOWN_TOKENS if token),
        label="Values that mean “unknown”",
        help_text="Comma-separated, matched case-insensitively. Empty values are always unknown. Rows with an "
        "unknown group are counted and left out of the comparisons.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text = (
            f"Comma-separated UTF-8 CSV with a header row, or Parquet; at most "
            f"{human_size(settings.DATASET_MAX_UPLOAD_BYTES)}. The file is not kept, only its SHA-256."
        )

    def spec(self) -> AuditSpec:
        data = self.cleaned_data
        return AuditSpec.from_input(
            label=data["label"],
            positive=data["positive"],
            prediction=data["prediction"],
            score=data["score"],
            threshold=data["threshold"],
            attributes=data["attributes"],
            intersect=data["intersect"],
            references=data.get("reference") or "",
            # The field starts with the defaults; emptied, only empty values are unknown.
            unknown_tokens=data.get("unknown_tokens") or "",
            max_groups=settings.DATASET_MAX_GROUPS,
        )


class PredictionAuditRetireForm(forms.Form):
    # Not required here: the service says what is missing, in the same words as the API.
    reason = forms.CharField(
        required=False,
        label="Why is this audit retired?",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Kept with the audit and in the activity log. The audit itself is not deleted.",
    )
