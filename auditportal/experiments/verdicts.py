"""Sample-size-aware fairness verdicts on each trial's latest validation counts.

The statistics are the prediction audit's (auditportal/fairness/statistics/stats.py and judge.py, docs/audit-json.md): a
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
from auditportal.fairness.files.metricsfile import confusion_counts
from auditportal.fairness.statistics import judge, stats
from auditportal.policies.selectors import policy_active

RECALL_METRIC = "tpr"  # equal opportunity: the gap the trainer's eod measures


def trial_verdicts_update(*, trial: Trial, step: int, metrics: Mapping[str, float | None]) -> list[TrialVerdict]:
    """Judge every attribute in one validation's metrics under the active fairness policy; call inside
    the ingesting transaction. Each verdict records the policy version."""
    policy = policy_active()
    tolerance, alpha = policy.tolerance, policy.alpha
    existing = {verdict.attribute: verdict for verdict in trial.verdicts.all()}
    updated = []
    for attribute, counts in confusion_counts(metrics).items():
        current = existing.get(attribute)
        if current is not None and current.step > step:
            continue  # an older validation read late (after a crash) never overwrites a newer verdict
        section = judge.judge_attribute(
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
        deciding = _deciding_comparison(section["comparisons"])
        verdict = "" if deciding is None else str(deciding["verdict"])
        values: dict[str, Any] = {
            "step": step,
            "tolerance": tolerance,
            "alpha": alpha,
            "policy": policy,
            "reference": section["reference"] or "",
            "verdict": verdict,
            "group": "" if deciding is None else deciding["group"],
            "difference": None if deciding is None else deciding["difference"],
            "ci_low": None if deciding is None else deciding["ci_low"],
            "ci_high": None if deciding is None else deciding["ci_high"],
            "positives_needed": None if deciding is None else deciding["positives_needed"],
            "noise_floor": judge.recall_noise_floor(section),
            "document": section,
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


def _deciding_comparison(comparisons: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The recall comparison that decides the attribute: the worst verdict, then the widest gap."""
    defined = [c for c in comparisons if c["metric"] == RECALL_METRIC and not c["undefined"]]
    if not defined:
        return None
    return max(defined, key=lambda c: (stats.VERDICTS.index(c["verdict"]), abs(c["difference"] or 0.0)))
