"""A trial review request with 80 comparisons, as the demo's trial 3 has: gender (3 groups), age group
(4) and their intersection (12), five metrics each, so 2 + 3 + 11 = 16 comparisons per metric; its
checkpoint is a local folder (the local backend's absolute path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from auditportal.accounts.models import User
from auditportal.approvals import services
from auditportal.approvals.models import ReviewRequest
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import services as experiment_services
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Trial
from auditportal.fairness.documents import verdict_documents
from auditportal.fairness.files.metricsfile import MetricRecord, confusion_counts
from auditportal.fairness.statistics.stats import COMPARED
from tests.factories import TrialFactory

GENDERS = ("female", "male", "nonbinary")
AGE_GROUPS = ("18-29", "30-44", "45-64", "65+")
# Rows per gender and age group, and each gender's recall: women's is lower (the demo's bias), the
# nonbinary groups are small (their comparisons stay INCONCLUSIVE).
ROWS = {"female": (900, 1300, 1400, 600), "male": (880, 1250, 1350, 560), "nonbinary": (40, 60, 50, 20)}
RECALL = {"female": 0.62, "male": 0.82, "nonbinary": 0.75}
FALSE_POSITIVE_RATE = {"18-29": 0.16, "30-44": 0.11, "45-64": 0.09, "65+": 0.14}
POSITIVE_SHARE = {"18-29": 0.35, "30-44": 0.45, "45-64": 0.5, "65+": 0.4}
COMPARISONS = 80


def cells(gender: str, age: str) -> tuple[int, int, int, int]:
    """(tp, fn, fp, tn) of one gender and age group."""
    rows = ROWS[gender][AGE_GROUPS.index(age)]
    positives = round(rows * POSITIVE_SHARE[age])
    tp = round(positives * RECALL[gender])
    fp = round((rows - positives) * FALSE_POSITIVE_RATE[age])
    return tp, positives - tp, fp, rows - positives - fp


def validation_metrics() -> dict[str, float | None]:
    """One validation's counts per gender, per age group and per intersection (trainer/README.md)."""
    metrics: dict[str, float | None] = {"accuracy": 0.81, "eod": 0.2}
    by_gender: dict[str, list[int]] = {gender: [0, 0, 0, 0] for gender in GENDERS}
    by_age: dict[str, list[int]] = {age: [0, 0, 0, 0] for age in AGE_GROUPS}
    for gender in GENDERS:
        for age in AGE_GROUPS:
            counts = cells(gender, age)
            for index, (name, value) in enumerate(zip(("tp", "fn", "fp", "tn"), counts, strict=True)):
                metrics[f"count/gender&age_group/{gender}&{age}/{name}"] = float(value)
                by_gender[gender][index] += value
                by_age[age][index] += value
    for attribute, totals in (("gender", by_gender), ("age_group", by_age)):
        metrics[f"count/{attribute}/unknown"] = 0.0
        for group, values in totals.items():
            for name, value in zip(("tp", "fn", "fp", "tn"), values, strict=True):
                metrics[f"count/{attribute}/{group}/{name}"] = float(value)
    metrics["count/gender&age_group/unknown"] = 0.0
    return metrics


def eighty_comparison_request(
    version: DatasetVersion, engineer: User, runs: Path, *, title: str = "Credit model v5 for pre-screening"
) -> ReviewRequest:
    """``engineer``'s draft review request of a trial whose frozen validation has 80 comparisons, its
    checkpoint a folder under ``runs`` (an absolute path, as the local backend records it)."""
    trial: Trial = TrialFactory.create(experiment__dataset_version=version, experiment__launched_by=engineer)
    trial_metrics_ingest(trial=trial, records=[MetricRecord(kind="validation", step=4, metrics=validation_metrics())])
    checkpoint = runs / f"exp-{trial.experiment_id}" / "trial-1" / "xdg" / "determined" / "0b5d3f4e-checkpoint"
    checkpoint.mkdir(parents=True)
    trial.checkpoint = str(checkpoint)
    trial.save(update_fields=["checkpoint"])
    document = experiment_services.verdict_document_freeze_trial(user=engineer, trial=trial, step=4)
    return services.review_request_create(
        user=engineer, title=title, intended_use="Pre-screening of loan applications", documents=[document]
    )


def eighty_comparison_document(tolerance: float = 0.05, metrics: tuple[str, ...] = COMPARED) -> dict[str, Any]:
    """The frozen document such a trial's validation gets, built without the database (for figure tests)."""
    return verdict_documents.trial_validation_document(
        counts=confusion_counts(validation_metrics()),
        step=4,
        dataset_version={"name": "credit-demo", "number": 1, "sha256": "0" * 64},
        experiment={"id": 1, "name": "demo", "det_experiment_id": None, "config_yaml": "name: demo\n"},
        trial={"number": 3, "det_trial_id": None, "hparams": {}},
        policy={
            "version": 1,
            "tolerance": tolerance,
            "alpha": 0.05,
            "metrics": list(metrics),
            "reference_rule": "largest",
            "min_group_size": None,
        },
    )
