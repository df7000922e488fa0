from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import configs
from auditportal.experiments.models import Template
from auditportal.lib.jsonlimits import JSONInputError, json_loads


class LaunchForm(forms.Form):
    dataset_version = forms.ModelChoiceField(
        queryset=DatasetVersion.objects.none(), label="Dataset version", empty_label="— choose —"
    )
    template = forms.ChoiceField(
        choices=Template.choices,
        label="Template",
        help_text=(
            "Searches minimise fair_objective = val_loss + search_lambda × eod_beyond_noise "
            "(the largest recall gap less its sampling noise)."
        ),
    )
    hparams = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        label="Hyperparameters (JSON, overrides the template)",
        help_text=(
            'Values or Determined ranges, e.g. {"fairness_lambda": {"type": "double", "minval": 0, "maxval": 1}, '
            '"dropout": 0.2}. Leave empty for the template defaults.'
        ),
    )
    max_trials = forms.IntegerField(required=False, min_value=1, label="Trials (searches)", initial=4)
    batches = forms.IntegerField(min_value=1, initial=200, label="Training length (batches)")
    slots_per_trial = forms.IntegerField(
        required=False,
        min_value=configs.SLOTS_PER_TRIAL_MIN,
        max_value=configs.SLOTS_PER_TRIAL_MAX,
        initial=1,
        label="Processes per trial",
        help_text=(
            f"{configs.SLOTS_PER_TRIAL_MIN} to {configs.SLOTS_PER_TRIAL_MAX} (Determined's slots_per_trial): "
            "the trial trains data-parallel on that many workers, and the worker-share chart compares them."
        ),
    )

    max_concurrent_trials = forms.IntegerField(
        required=False,
        min_value=0,
        label="Trials at once",
        help_text="Determined's max_concurrent_trials.",
    )

    def __init__(self, *args: Any, versions: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["dataset_version"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = versions
        max_trials = self.fields["max_trials"]
        assert isinstance(max_trials, forms.IntegerField)
        max_trials.max_value = settings.EXPERIMENT_MAX_TRIALS
        max_trials.help_text = f"At most {settings.EXPERIMENT_MAX_TRIALS}; a single trial ignores this."
        concurrent = self.fields["max_concurrent_trials"]
        default = configs.default_max_concurrent_trials(
            backend=settings.EXPERIMENT_BACKEND, slots_per_trial=1, local_slots=settings.EXPERIMENT_LOCAL_CONCURRENCY
        )
        concurrent.help_text = (
            "Determined's max_concurrent_trials: how many of a search's trials train at once (ASHA shares "
            "them among its brackets); the next starts when one ends, so a trial stopped early frees its "
            "place. 0: Determined's own default. Empty: "
            + (
                f"{default} here (the {settings.EXPERIMENT_LOCAL_CONCURRENCY} slots this machine runs, "
                "divided by the processes per trial)."
                if settings.EXPERIMENT_BACKEND == "local"
                else "0, the master's default."
            )
        )

    def clean_slots_per_trial(self) -> int:
        value = self.cleaned_data.get("slots_per_trial")
        return 1 if value is None else int(value)

    def clean_hparams(self) -> dict[str, Any]:
        text = (self.cleaned_data.get("hparams") or "").strip()
        if not text:
            return {}
        try:
            value = json_loads(text, field="hparams")
        except JSONInputError as exc:
            raise forms.ValidationError(exc.message) from None
        if not isinstance(value, dict):
            raise forms.ValidationError("Hyperparameters must be a JSON object of name: value or range.")
        return value
