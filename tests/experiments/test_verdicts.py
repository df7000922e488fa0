from __future__ import annotations

from pathlib import Path

import pytest

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Trial, TrialVerdict
from auditportal.experiments.verdicts import trial_verdicts_update
from auditportal.fairness.files.metricsfile import MetricRecord, confusion_counts, metric_group
from auditportal.fairness.statistics.judge import recall_noise_floor
from tests.factories import TrialFactory


def _counts(attribute: str, groups: dict[str, tuple[int, int, int, int]], unknown: int = 0) -> dict[str, float]:
    metrics: dict[str, float] = {f"count/{attribute}/unknown": float(unknown)}
    for group, cells in groups.items():
        for cell, value in zip(("tp", "fn", "fp", "tn"), cells, strict=True):
            metrics[f"count/{attribute}/{group}/{cell}"] = float(value)
    return metrics


@pytest.fixture
def trial(demo_version: DatasetVersion, bob: User) -> Trial:
    return TrialFactory.create(experiment__dataset_version=demo_version, experiment__launched_by=bob)


def test_the_trainers_encoded_names_are_decoded() -> None:
    assert metric_group("count/race/N%2FA/tp") == ("race", "N/A")
    counts = confusion_counts(_counts("race", {"N%2FA": (1, 2, 3, 4), "b": (5, 6, 7, 8)}, unknown=9))
    assert counts["race"].groups == ("N/A", "b")
    assert counts["race"].counts == [(1, 2, 3, 4), (5, 6, 7, 8)]
    assert counts["race"].unknown == 9


def test_a_large_real_recall_gap_fails(trial: Trial) -> None:
    # recall 0.60 vs 0.90 over thousands of positives: the gap is real and beyond 0.05
    metrics = _counts("gender", {"female": (1200, 800, 300, 2700), "male": (2700, 300, 300, 2700)})
    (verdict,) = trial_verdicts_update(trial=trial, step=5, metrics=metrics)
    assert (verdict.attribute, verdict.verdict, verdict.group, verdict.reference) == (
        "gender",
        "FAIL",
        "female",
        "male",
    )
    assert verdict.difference == pytest.approx(-0.30)
    assert verdict.ci_high is not None
    assert verdict.ci_high < -0.05
    assert (verdict.tolerance, verdict.alpha) == (0.05, 0.05)


def test_a_noisy_gap_in_a_small_group_is_inconclusive_with_the_positives_needed(trial: Trial) -> None:
    # 9 positives with recall 0.78 against 0.92 in a large group: a raw gap of 0.14 that proves nothing
    metrics = _counts("gender", {"nonbinary": (7, 2, 3, 30), "male": (9200, 800, 900, 9100)})
    (verdict,) = trial_verdicts_update(trial=trial, step=5, metrics=metrics)
    assert verdict.verdict == "INCONCLUSIVE"
    assert verdict.difference == pytest.approx(7 / 9 - 0.92)
    assert verdict.positives_needed is not None
    assert verdict.positives_needed > 9


def test_a_small_group_cannot_hide_a_gap_far_beyond_the_tolerance(trial: Trial) -> None:
    # 40 positives, recall 0.20 against 0.90: small, but the interval still lies beyond -0.05
    metrics = _counts("gender", {"nonbinary": (8, 32, 5, 55), "male": (9000, 1000, 900, 9100)})
    (verdict,) = trial_verdicts_update(trial=trial, step=5, metrics=metrics)
    assert verdict.verdict == "FAIL"


def test_equal_recall_over_many_positives_passes(trial: Trial) -> None:
    metrics = _counts("age_group", {"18-29": (4500, 500, 400, 4600), "30-44": (9000, 1000, 800, 9200)})
    (verdict,) = trial_verdicts_update(trial=trial, step=5, metrics=metrics)
    assert verdict.verdict == "PASS"
    assert verdict.ci_low is not None
    assert verdict.ci_high is not None
    assert -0.05 < verdict.ci_low < verdict.ci_high < 0.05


def test_an_older_report_never_overwrites_a_newer_verdict_and_events_mark_changes_only(trial: Trial) -> None:
    failing = _counts("gender", {"female": (1200, 800, 300, 2700), "male": (2700, 300, 300, 2700)})
    passing = _counts("gender", {"female": (2700, 300, 300, 2700), "male": (2700, 300, 300, 2700)})
    trial_verdicts_update(trial=trial, step=10, metrics=passing)
    trial_verdicts_update(trial=trial, step=10, metrics=passing)
    trial_verdicts_update(trial=trial, step=5, metrics=failing)
    verdict = TrialVerdict.objects.get(trial=trial)
    assert (verdict.step, verdict.verdict) == (10, "PASS")
    changes = Event.objects.filter(verb="trial_verdict.changed", target_id=str(trial.pk))
    assert [(e.data["from"], e.data["to"]) for e in changes] == [(None, "PASS")]


def test_ingesting_a_validation_report_judges_the_trial(trial: Trial, dataset_storage: Path) -> None:
    metrics: dict[str, float | None] = {"eod": 0.3, "fair_objective": 0.9, "accuracy": 0.8}
    metrics.update(_counts("gender", {"female": (1200, 800, 300, 2700), "male": (2700, 300, 300, 2700)}))
    trial_metrics_ingest(
        trial=trial,
        records=[
            MetricRecord(kind="training", step=3, metrics={"loss": 0.5}, end=10),
            MetricRecord(kind="validation", step=5, metrics=metrics, end=20),
        ],
    )
    verdict = TrialVerdict.objects.get(trial=trial, attribute="gender")
    assert (verdict.step, verdict.verdict) == (5, "FAIL")
    assert verdict.document["groups"]["female"]["tpr"] == pytest.approx(0.6)


def test_metric_names_with_tabs_backslashes_and_newlines_survive_ingestion(trial: Trial) -> None:
    from auditportal.experiments.ingest import points_upsert
    from auditportal.experiments.models import MetricPoint

    names = ["count/a\\b/g\tx/tp", "recall/line\nbreak/ü", "plain", "none"]
    rows = [
        (trial.pk, "validation", 5, name, None if name == "none" else 0.1 * index, "attr", "g")
        for index, name in enumerate(names)
    ]
    points_upsert(rows)
    points_upsert(rows)  # idempotent
    stored = {p.name: p.value for p in MetricPoint.objects.filter(trial=trial)}
    assert stored == {name: (None if name == "none" else pytest.approx(0.1 * i)) for i, name in enumerate(names)}


def test_a_re_read_batch_mixing_stored_and_new_points_updates_and_adds_without_duplicates(trial: Trial) -> None:
    from auditportal.experiments.ingest import points_upsert
    from auditportal.experiments.models import MetricPoint

    points_upsert([(trial.pk, "validation", 5, f"m{i}", float(i), "", "") for i in range(10)])
    points_upsert([(trial.pk, "validation", 5, f"m{i}", float(i) + 0.5, "", "") for i in range(5, 15)])
    stored = dict(MetricPoint.objects.filter(trial=trial).values_list("name", "value"))
    assert len(stored) == 15
    assert stored["m0"] == 0.0
    assert stored["m7"] == 7.5
    assert stored["m14"] == 14.5


@pytest.mark.django_db(transaction=True)
def test_upserting_outside_a_transaction_still_stores_every_point(demo_version: DatasetVersion, bob: User) -> None:
    from auditportal.experiments.ingest import points_upsert
    from auditportal.experiments.models import MetricPoint

    trial = TrialFactory.create(experiment__dataset_version=demo_version, experiment__launched_by=bob)
    points_upsert([(trial.pk, "validation", 5, f"m{i}", float(i), "", "") for i in range(10)])
    points_upsert([(trial.pk, "validation", 5, f"m{i}", float(i) + 1, "", "") for i in range(10)])  # re-read path
    stored = dict(MetricPoint.objects.filter(trial=trial).values_list("name", "value"))
    assert stored == {f"m{i}": float(i) + 1 for i in range(10)}


def test_a_verdict_keeps_the_largest_noise_floor_of_its_defined_recall_comparisons(trial: Trial) -> None:
    # Three groups: two recall comparisons against the reference (the largest group); the smaller
    # group's comparison has the wider floor.
    metrics = _counts("race", {"a": (600, 400, 100, 900), "b": (60, 40, 10, 90), "c": (6000, 4000, 1000, 9000)})
    (verdict,) = trial_verdicts_update(trial=trial, step=5, metrics=metrics)
    floors = {c["group"]: c["noise_floor"] for c in verdict.document["comparisons"] if c["metric"] == "tpr"}
    assert set(floors) == {"a", "b"}
    assert floors["b"] > floors["a"] > 0
    assert verdict.noise_floor == floors["b"]
    verdict.refresh_from_db()
    assert verdict.noise_floor == floors["b"]


def test_the_recall_noise_floor_leaves_out_other_metrics_and_undefined_comparisons() -> None:
    section = {
        "comparisons": [
            {"metric": "tpr", "undefined": False, "noise_floor": 0.08},
            {"metric": "fpr", "undefined": False, "noise_floor": 0.5},
            {"metric": "tpr", "undefined": True, "noise_floor": 0.9},
            {"metric": "tpr", "undefined": False, "noise_floor": 0.12},
        ]
    }
    assert recall_noise_floor(section) == 0.12
    assert recall_noise_floor({"comparisons": []}) is None
    assert recall_noise_floor({}) is None
