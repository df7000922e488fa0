"""Sample-size-aware fairness verdicts on each trial's latest validation counts.

The statistics are the prediction audit's (auditportal/fairness/stats.py and judge.py, docs/audit-json.md): a
small group's noisy recall gap comes out INCONCLUSIVE with the positives it would need, not FAIL,
and a real gap hidden in a small group is not called PASS.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.experiments.models import Trial, TrialVerdict
from auditportal.fairness import judge, stats
from auditportal.fairness.metricsfile import confusion_counts
from auditportal.policies.selectors import policy_active

HEADLINE_METRIC = "tpr"  # equal opportunity: the gap the trainer's eod measures


def trial_verdicts_update(*, trial: Trial, step: int, metrics: Mapping[str, float | None]) -> list[TrialVerdict]:
    """Judge every attribute in one validation report under the active fairness policy; call inside
    the ingesting transaction. Each verdict records the policy version."""
    policy = policy_active()
    tolerance, alpha = policy.tolerance, policy.alpha
    existing = {verdict.attribute: verdict for verdict in trial.verdicts.all()}
    updated = []
    for attribute, counts in confusion_counts(metrics).items():
        current = existing.get(attribute)
        if current is not None and current.step > step:
            continue  # an older report read late (after a crash) never overwrites a newer verdict
        document = judge.judge_attribute(
            np.asarray(counts.counts, dtype=np.int64).reshape(len(counts.groups), 4),
            counts.groups,
            unknown=counts.unknown,
            tolerance=tolerance,
            alpha=alpha,
            columns=counts.columns,
            values=counts.values,
            metrics=policy.metrics,
            min_group_size=policy.min_group_size,
        )
        headline = _headline(document["comparisons"])
        verdict = "" if headline is None else str(headline["verdict"])
        values: dict[str, Any] = {
            "step": step,
            "tolerance": tolerance,
            "alpha": alpha,
            "policy": policy,
            "reference": document["reference"] or "",
            "verdict": verdict,
            "group": "" if headline is None else headline["group"],
            "difference": None if headline is None else headline["difference"],
            "ci_low": None if headline is None else headline["ci_low"],
            "ci_high": None if headline is None else headline["ci_high"],
            "positives_needed": None if headline is None else headline["positives_needed"],
            "noise_floor": judge.recall_noise_floor(document),
            "document": document,
        }
        saved, _ = TrialVerdict.objects.update_or_create(trial=trial, attribute=attribute, defaults=values)
        previous = current.verdict if current is not None else None
        if previous != verdict:
            event_record(
                actor=None,
                verb=Verb.TRIAL_VERDICT_CHANGED,
                target=trial,
                data={
                    "attribute": attribute,
                    "from": previous,
                    "to": verdict,
                    "step": step,
                    "policy": policy.version,
                },
            )
        updated.append(saved)
    return updated


def _headline(comparisons: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The recall comparison that decides the attribute: the worst verdict, then the widest gap."""
    defined = [c for c in comparisons if c["metric"] == HEADLINE_METRIC and not c["undefined"]]
    if not defined:
        return None
    return max(defined, key=lambda c: (stats.VERDICTS.index(c["verdict"]), abs(c["difference"] or 0.0)))
