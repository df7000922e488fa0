from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from auditportal.fairness.files.tabular import DEFAULT_UNKNOWN_TOKENS, DatasetSpec, parse_unknown_tokens
from auditportal.fairness.text.sizes import human_size


class UploadForm(forms.Form):
    name = forms.CharField(
        max_length=120,
        label="Dataset name",
        help_text="Registering a file under an existing name creates its next version.",
    )
    file = forms.FileField(label="CSV or Parquet file", allow_empty_file=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text = (
            f"Comma-separated UTF-8 CSV with a header row, or Parquet; at most "
            f"{human_size(settings.DATASET_MAX_UPLOAD_BYTES)}."
        )


class DeclarationForm(forms.Form):
    label = forms.ChoiceField(label="Label column", help_text="The binary outcome the model predicts.")
    positive = forms.CharField(
        max_length=255,
        label="Positive label value",
        help_text="The value that counts as the favourable/positive outcome (e.g. 1, yes, approved).",
    )
    attributes = forms.MultipleChoiceField(
        label="Sensitive attributes",
        widget=forms.CheckboxSelectMultiple,
        help_text="Columns that identify groups of people (gender, race, age group...). The first two are also "
        "summarised as an intersection.",
    )
    unknown_tokens = forms.CharField(
        required=False,
        initial=", ".join(token for token in DEFAULT_UNKNOWN_TOKENS if token),
        label="Values that mean “unknown”",
        help_text="Comma-separated, matched case-insensitively. Empty values are always unknown. Unknowns are "
        "kept and counted, never dropped.",
    )
    features = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Feature columns",
        help_text="Leave all unticked to use every column that is neither the label nor an attribute.",
    )
    confirm_groups = forms.BooleanField(
        label="I have checked the group values inferred for each sensitive attribute (table above).",
    )

    def __init__(self, *args: Any, columns: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(name, name) for name in columns]
        for name, options in (
            ("label", [("", "— choose —"), *choices]),
            ("attributes", choices),
            ("features", choices),
        ):
            field = self.fields[name]
            assert isinstance(field, forms.ChoiceField)
            field.choices = options

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        label = cleaned.get("label")
        attributes = cleaned.get("attributes") or []
        features = cleaned.get("features") or []
        if label and label in attributes:
            self.add_error("attributes", f"The label column {label!r} cannot also be a sensitive attribute.")
        if label and label in features:
            self.add_error("features", f"The label column {label!r} cannot also be a feature.")
        return cleaned

    def spec(self) -> DatasetSpec:
        data = self.cleaned_data
        return DatasetSpec(
            label=data["label"],
            positive=data["positive"].strip(),
            attributes=tuple(data["attributes"]),
            unknown_tokens=parse_unknown_tokens(data.get("unknown_tokens") or ""),
            features=tuple(data["features"]) or None,
            max_groups=settings.DATASET_MAX_GROUPS,
        )


class RetireForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        required=False,  # the service says what is wrong with an empty reason
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Reason",
        help_text="Shown on this page; a retired version is offered to no new experiment.",
    )


class StewardForm(forms.Form):
    """An administrator adds a steward to a dataset, or removes one."""

    username = forms.CharField(max_length=150, label="User name")
    action = forms.ChoiceField(choices=[("add", "Add"), ("remove", "Remove")], widget=forms.HiddenInput)
