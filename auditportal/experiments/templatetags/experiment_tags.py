from __future__ import annotations

from collections.abc import Mapping

from django import template

from auditportal.experiments.models import Trial, TrialVerdict
from auditportal.experiments.selectors import trial_stop_note, verdict_gap_text
from auditportal.fairness.text.presentation import hparams_text

register = template.Library()


@register.filter
def hparams(values: Mapping[str, object] | None) -> list[tuple[str, str]]:
    """A trial's hyperparameters as ``(name, text)`` pairs, values at 4 significant digits: the
    one formatter the page, progress.json (the live rows) and the charts' hover text share."""
    return hparams_text(values or {})


@register.filter
def stop_note(trial: Trial) -> str:
    """How the portal stopped the trial (an early stop, a cancel) and when: selectors.trial_stop_note,
    which progress.json sends for the live rows too."""
    return trial_stop_note(trial)


@register.filter
def verdict_gap(verdict: TrialVerdict) -> str:
    """The verdict's deciding recall gap, its interval and what would decide it: selectors.verdict_gap_text,
    which progress.json sends for the live rows too."""
    return verdict_gap_text(verdict)
