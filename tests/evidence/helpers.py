from __future__ import annotations

from auditportal.accounts.models import User
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Trial
from auditportal.fairness.files.metricsfile import MetricRecord
from auditportal.policies.models import FairnessPolicy
from tests.factories import TrialFactory

FAIR = {"female": (4500, 500, 400, 4600), "male": (9000, 1000, 800, 9200)}
UNFAIR = {"female": (1200, 800, 300, 2700), "male": (2700, 300, 300, 2700)}


def counts(groups: dict[str, tuple[int, int, int, int]], unknown: int = 0) -> dict[str, float | None]:
    metrics: dict[str, float | None] = {"count/gender/unknown": float(unknown), "accuracy": 0.8}
    for group, cells in groups.items():
        for cell, value in zip(("tp", "fn", "fp", "tn"), cells, strict=True):
            metrics[f"count/gender/{group}/{cell}"] = float(value)
    return metrics


def trial_with_validations(version: DatasetVersion, engineer: User) -> Trial:
    """A trial that reported an unfair validation at step 2 and a fair one at step 4."""
    trial: Trial = TrialFactory.create(experiment__dataset_version=version, experiment__launched_by=engineer)
    trial_metrics_ingest(
        trial=trial,
        records=[
            MetricRecord(kind="validation", step=2, metrics=counts(UNFAIR)),
            MetricRecord(kind="validation", step=4, metrics=counts(FAIR, unknown=5)),
        ],
    )
    return trial


def policy_v2() -> FairnessPolicy:
    return FairnessPolicy.objects.create(version=2, tolerance=0.01, alpha=0.05, metrics=["tpr"], reason="stricter")
