from __future__ import annotations

from typing import Any

from django import forms

from auditportal.fairness.statistics import stats
from auditportal.policies.models import MAX_APPROVAL_QUORUM, FairnessPolicy

METRIC_CHOICES = [
    ("tpr", "TPR: equal opportunity (always judged: trial verdicts judge recall)"),
    ("fpr", "FPR"),
    ("equalized_odds", "Equalized odds"),
    ("selection_rate", "Selection rate: demographic parity"),
    ("ppv", "PPV: predictive parity"),
]
assert [name for name, _ in METRIC_CHOICES] == list(stats.COMPARED)


class PolicyForm(forms.Form):
    """The next version; it starts with the active version's values."""

    tolerance = forms.FloatField(
        label="Tolerance δ", help_text="The largest acceptable gap between a group and the reference, in [0, 1)."
    )
    alpha = forms.FloatField(label="Alpha", help_text="Familywise error rate per metric and attribute, in (0, 0.5].")
    metrics = forms.MultipleChoiceField(
        choices=METRIC_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        label="Metrics judged",
        help_text="Comparisons of the others are still shown, marked not judged.",
    )
    min_group_size = forms.IntegerField(
        required=False,
        label="Minimum group size",
        help_text="A comparison with a smaller group (or reference) cannot PASS; it can still FAIL. Empty: none.",
    )
    approval_quorum = forms.IntegerField(
        min_value=1,
        max_value=MAX_APPROVAL_QUORUM,
        label="Approval quorum",
        help_text="Distinct ethics-committee members whose approval a review request or a waiver needs.",
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Reason",
        help_text="Why the policy changes; shown in the history.",
    )

    @classmethod
    def starting_from(cls, policy: FairnessPolicy, data: Any = None) -> PolicyForm:
        initial = {
            "tolerance": policy.tolerance,
            "alpha": policy.alpha,
            "metrics": list(policy.metrics),
            "min_group_size": policy.min_group_size,
            "approval_quorum": policy.approval_quorum,
        }
        return cls(data, initial=initial)
