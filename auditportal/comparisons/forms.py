from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from django import forms

from auditportal.audits.models import PredictionAudit
from auditportal.experiments.models import Trial
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


def audit_model_text(audit: PredictionAudit) -> str:
    """How an audit took its model's predictions, in a few words: ``pred`` or ``score ≥ 0.5``."""
    parameters = audit.parameters
    if parameters.get("prediction"):
        return str(parameters["prediction"])
    text = f"{parameters.get('score')} ≥ {parameters.get('threshold')}"
    if (parameters.get("thresholds") or {}).get("groups"):
        text += f", own thresholds for groups of {parameters['thresholds']['attribute']}"
    return text


def _audit_choices(audits: Sequence[PredictionAudit]) -> list[Any]:
    """Audits grouped by the file they audited (its name and SHA-256), newest first."""
    files: dict[str, list[tuple[int, str]]] = {}
    for audit in audits:
        group = f"{audit.original_name} (SHA-256 {audit.sha256[:12]}…)"
        label = (
            f"audit #{audit.pk}: {audit_model_text(audit)} · {audit.created_at:%Y-%m-%d} · {audit.created_by.username}"
        )
        files.setdefault(group, []).append((audit.pk, label))
    return [("", "Choose an audit"), *files.items()]


def _trial_choices(trials: Sequence[Trial]) -> list[Any]:
    """Trials grouped by the dataset version they were validated on, newest first."""
    versions: dict[str, list[tuple[int, str]]] = {}
    for trial in trials:
        version = trial.experiment.dataset_version
        group = f"{version.dataset.name} v{version.number} (SHA-256 {version.sha256[:12]}…)"
        label = f"trial {trial.pk}: {trial.experiment.name} #{trial.number}"
        versions.setdefault(group, []).append((trial.pk, label))
    return [("", "Choose a trial"), *versions.items()]


class AuditsComparisonForm(forms.Form):
    """Two prediction audits of one file, and that file again (docs/comparisons.md, "Two audits")."""

    prefix = "audits"

    file = forms.FileField(
        label="The file both audits audited",
        allow_empty_file=True,
        help_text="Byte for byte: its SHA-256 must be the one both audits recorded.",
    )
    champion_audit = forms.TypedChoiceField(
        coerce=int, label="Champion's audit (A)", help_text="The model in production."
    )
    challenger_audit = forms.TypedChoiceField(
        coerce=int,
        label="Challenger's audit (B)",
        help_text="The model that would replace it, audited on the same file.",
    )
    metrics = forms.MultipleChoiceField(
        choices=[(m, paired.METRIC_NAMES[m]) for m in paired.METRICS],
        initial=list(paired.METRICS),
        widget=forms.CheckboxSelectMultiple,
        label="Metrics",
    )

    def __init__(self, *args: Any, audits: Sequence[PredictionAudit], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = _audit_choices(audits)
        for name in ("champion_audit", "challenger_audit"):
            cast(forms.TypedChoiceField, self.fields[name]).choices = choices


class TrialsComparisonForm(forms.Form):
    """Two completed trials validated on the same dataset version (docs/comparisons.md)."""

    prefix = "trials"

    champion_trial = forms.TypedChoiceField(
        coerce=int, label="Champion trial (A)", help_text="The model in production."
    )
    challenger_trial = forms.TypedChoiceField(
        coerce=int,
        label="Challenger trial (B)",
        help_text="The model that would replace it, validated on the same dataset version.",
    )

    def __init__(self, *args: Any, trials: Sequence[Trial], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = _trial_choices(trials)
        for name in ("champion_trial", "challenger_trial"):
            cast(forms.TypedChoiceField, self.fields[name]).choices = choices
