from __future__ import annotations

from collections.abc import Mapping

from django import template

from auditportal.fairness.presentation import hparams_text

register = template.Library()


@register.filter
def hparams(values: Mapping[str, object] | None) -> list[tuple[str, str]]:
    """A trial's hyperparameters as ``(name, text)`` pairs, values at 4 significant digits: the
    one formatter the page, progress.json (the live rows) and the charts' hover text share."""
    return hparams_text(values or {})
