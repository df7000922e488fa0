from __future__ import annotations

from django import forms

from auditportal.attributions import services


class AttributionRequestForm(forms.Form):
    sample_size = forms.IntegerField(
        initial=services.DEFAULT_SAMPLE_SIZE,
        min_value=services.MIN_SAMPLE_SIZE,
        max_value=services.MAX_SAMPLE_SIZE,
        label="Validation rows",
        help_text="at most; drawn stratified, every group represented",
    )
    seed = forms.IntegerField(initial=0, min_value=0, max_value=services.MAX_SEED, label="Seed")
