from __future__ import annotations

from django import forms

from auditportal.fairness.statistics import paired
from auditportal.fairness.statistics.paired_file import PairedSpec


class PairedComparisonForm(forms.Form):
    file = forms.FileField(label="CSV or Parquet file with both models' predictions", allow_empty_file=True)
    label = forms.CharField(max_length=255, label="Label column", help_text="The true binary outcome.")
    positive = forms.CharField(max_length=255, initial="1", label="Positive label value")
    champion = forms.CharField(
        max_length=255, required=False, label="Champion column (A)", help_text="The model in production."
    )
    challenger = forms.CharField(
        max_length=255, required=False, label="Challenger column (B)", help_text="The model that would replace it."
    )
    output = forms.ChoiceField(
        choices=[("prediction", "0/1 predictions"), ("score", "scores, each at its threshold")],
        initial="prediction",
        label="The two columns hold",
    )
    champion_threshold = forms.FloatField(required=False, label="Champion's threshold")
    challenger_threshold = forms.FloatField(required=False, label="Challenger's threshold")
    attributes = forms.CharField(max_length=2000, label="Sensitive attribute columns", help_text="Comma-separated.")
    metrics = forms.MultipleChoiceField(
        choices=[(m, paired.METRIC_NAMES[m]) for m in paired.METRICS],
        initial=list(paired.METRICS),
        widget=forms.CheckboxSelectMultiple,
        label="Metrics",
    )

    def spec(self) -> PairedSpec:
        data = self.cleaned_data
        return PairedSpec.from_input(
            label=data["label"],
            positive=data["positive"],
            attributes=data["attributes"],
            champion=data["champion"],
            challenger=data["challenger"],
            output=data["output"],
            champion_threshold=data["champion_threshold"],
            challenger_threshold=data["challenger_threshold"],
            metrics=data["metrics"],
        )
