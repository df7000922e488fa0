"""Verdict documents: what a judged subject looked like, as one canonical JSON value (docs/verdict-documents.md).

A prediction audit, or one validation of a trial, becomes a document whose canonical bytes
(auditportal/fairness/documents/canonical.py) and their SHA-256 are frozen by the evidence app. Everything that
went into the verdict is inside; nothing that differs between two runs on the same inputs is (no
wall-clock time, no database id of the document or of the audit), so the same inputs give the same
bytes and the same hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from auditportal import __version__
from auditportal.fairness.documents.canonical import canonical_json
from auditportal.fairness.files.metricsfile import AttributeCounts
from auditportal.fairness.statistics import judge

JSON = dict[str, Any]

# The version of the document layout below; a change to its keys or their meaning is a new version.
# 2: "verdict" is the headline (held at alpha over all judged families), given in "headline".
SCHEMA_VERSION = 2

PREDICTION_AUDIT = "prediction_audit"
TRIAL_VALIDATION = "trial_validation"
PAIRED_COMPARISON = "paired_comparison"

POLICY_KEYS = ("version", "tolerance", "alpha", "metrics", "reference_rule", "min_group_size")


@dataclass(frozen=True)
class Frozen:
    """A document, its canonical bytes as text and their SHA-256."""

    document: JSON
    canonical: str
    sha256: str


def freeze(document: JSON) -> Frozen:
    canonical = canonical_json(document)
    # canonical_sha256(document), without encoding the document a second time.
    return Frozen(document=document, canonical=canonical.decode(), sha256=hashlib.sha256(canonical).hexdigest())


def prediction_audit_document(
    *,
    result: Mapping[str, Any],
    file_name: str,
    sha256: str,
    rows: int,
    parameters: Mapping[str, Any],
    policy: Mapping[str, Any],
) -> JSON:
    """The document of a prediction audit: its result document (docs/audit-json.md) as it was stored,
    with the file it judged, the parameters it was given and the policy it was judged under."""
    return {
        **_header(PREDICTION_AUDIT, policy),
        "verdict": result.get("verdict"),
        # Audit results of schema 1 have none: their verdict is the worst over the families.
        "headline": _plain(result.get("headline")),
        "file": {"name": file_name, "sha256": sha256, "rows": int(rows)},
        "parameters": _plain(parameters),
        "audit": _plain(result),
    }


def trial_validation_document(
    *,
    counts: Mapping[str, AttributeCounts],
    step: int,
    dataset_version: Mapping[str, Any],
    experiment: Mapping[str, Any],
    trial: Mapping[str, Any],
    policy: Mapping[str, Any],
) -> JSON:
    """The document of one validation of a trial: each attribute judged afresh under ``policy`` from
    that validation's confusion counts, with the data, the experiment and the trial it came from.

    ``dataset_version``: name, number, sha256. ``experiment``: id, name, det_experiment_id, config_yaml
    (only its SHA-256 is kept). ``trial``: number, det_trial_id, hparams.
    """
    header = _header(TRIAL_VALIDATION, policy)
    attributes = {attribute: _judge(attribute_counts, policy) for attribute, attribute_counts in sorted(counts.items())}
    headline = judge.headline(
        attributes,
        {attribute: np.asarray(counted.counts, dtype=np.int64) for attribute, counted in counts.items()},
        tolerance=float(policy["tolerance"]),
        alpha=float(policy["alpha"]),
    )
    return {
        **header,
        "verdict": headline["verdict"],
        "headline": headline,
        "levels": dict(judge.LEVELS),
        "step": int(step),
        "dataset_version": {
            "name": str(dataset_version["name"]),
            "number": int(dataset_version["number"]),
            "sha256": str(dataset_version["sha256"]),
        },
        "experiment": {
            "id": int(experiment["id"]),
            "name": str(experiment["name"]),
            "det_experiment_id": experiment.get("det_experiment_id"),
            "config_sha256": config_digest(str(experiment["config_yaml"])),
        },
        "trial": {
            "number": int(trial["number"]),
            "det_trial_id": trial.get("det_trial_id"),
            "hparams": _plain(trial.get("hparams") or {}),
        },
        "attributes": attributes,
    }


def paired_comparison_document(
    *,
    result: Mapping[str, Any],
    file_name: str,
    sha256: str,
    rows: int,
    parameters: Mapping[str, Any],
    policy: Mapping[str, Any],
) -> JSON:
    """The document of a paired comparison (docs/comparisons.md): "challenger B replaces champion A",
    with the comparison's result exactly as stored (each model's rates per group and metric, the paired
    differences with their intervals, McNemar's p-values, the verdicts, the rows needed), the file it
    read, the parameters and the policy.

    ``verdict`` speaks the committee's vocabulary (PASS / FAIL / INCONCLUSIVE), as every document's:
    FAIL when the challenger is WORSE than the champion for some group, INCONCLUSIVE when a group is
    undecided and none is worse, PASS when every group is BETTER, EQUIVALENT or DIFFERENT (a selection
    rate moved, which has no better side); null when nothing was compared. ``paired_verdict`` is the
    comparison's own (its worst group's). The groups WORSE or INCONCLUSIVE are the committee's
    findings (fairness/documents/findings.py).
    """
    champion = result.get("champion") or {}
    challenger = result.get("challenger") or {}
    return {
        **_header(PAIRED_COMPARISON, policy),
        "verdict": paired_headline(result),
        "headline": None,
        "paired_verdict": result.get("verdict"),
        "champion": {"column": str(champion.get("column")), "threshold": champion.get("threshold")},
        "challenger": {"column": str(challenger.get("column")), "threshold": challenger.get("threshold")},
        "file": {"name": file_name, "sha256": sha256, "rows": int(rows)},
        "parameters": _plain(parameters),
        "comparison": _plain(result),
    }


# A paired comparison's group verdicts (fairness/statistics/paired.py) in the committee's words.
PAIRED_AS_VERDICT = {
    "WORSE": "FAIL",
    "INCONCLUSIVE": "INCONCLUSIVE",
    "BETTER": "PASS",
    "EQUIVALENT": "PASS",
    "DIFFERENT": "PASS",
}


def paired_headline(result: Mapping[str, Any]) -> str | None:
    """FAIL, INCONCLUSIVE or PASS over every attribute's groups of a paired result; None when no group
    has a verdict."""
    verdicts = {
        PAIRED_AS_VERDICT.get(str(verdict), "INCONCLUSIVE")
        for section in (result.get("attributes") or {}).values()
        for verdict in (section.get("verdicts") or {}).values()
        if verdict is not None
    }
    for verdict in ("FAIL", "INCONCLUSIVE", "PASS"):
        if verdict in verdicts:
            return verdict
    return None


def config_digest(config_yaml: str) -> str:
    """The SHA-256 of the experiment config exactly as it was submitted (UTF-8)."""
    return hashlib.sha256(config_yaml.encode()).hexdigest()


def _header(kind: str, policy: Mapping[str, Any]) -> JSON:
    missing = [key for key in POLICY_KEYS if key not in policy]
    if missing:
        raise ValueError(f"the policy lacks {', '.join(missing)}")
    return {
        "schema_version": SCHEMA_VERSION,
        "code_version": __version__,
        "kind": kind,
        "policy": {key: _plain(policy[key]) for key in POLICY_KEYS},
    }


def _judge(counts: AttributeCounts, policy: Mapping[str, Any]) -> JSON:
    return judge.judge_attribute(
        np.asarray(counts.counts, dtype=np.int64).reshape(len(counts.groups), 4),
        counts.groups,
        unknown=counts.unknown,
        tolerance=float(policy["tolerance"]),
        alpha=float(policy["alpha"]),
        columns=counts.columns,
        values=counts.values,
        metrics=tuple(policy["metrics"]),
        min_group_size=policy["min_group_size"],
    )


def _plain(value: Any) -> Any:
    """JSON values only: tuples become lists (a JSON column returns lists, so the bytes must too)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
