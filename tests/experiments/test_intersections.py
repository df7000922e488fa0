"""The trainer's metric names for an intersection decode to one group each (issue 11): ingestion
stores each group under its own key, and the trial verdict judges four groups, not three."""

from __future__ import annotations

import numpy as np
import pytest

from auditportal.accounts.models import User
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Experiment, MetricPoint, Trial, TrialVerdict
from auditportal.fairness.files.intersections import split_key
from auditportal.fairness.files.metricsfile import MetricRecord, metric_group
from tests.intersection_file import ATTRIBUTE_KEY, PAIRS, UNKNOWN
from trainer import bias

LAYOUT = bias.GroupLayout.from_declared([("gender", ("a", "a&b")), ("race", ("b&c", "c"))])


def _validation_metrics() -> dict[str, float]:
    """What the monitor reports for the file's rows: the intersection's cells as in PAIRS."""
    counts = np.zeros((LAYOUT.n_slots, bias.CELLS), np.int64)
    gender, race, intersection = LAYOUT.offsets
    for index, (pair, (_, _, _, (tp, fn, fp, tn))) in enumerate(PAIRS.items()):
        cells = np.array([tn, fp, fn, tp])
        counts[intersection + index] += cells
        counts[gender + ("a", "a&b").index(pair[0])] += cells
        counts[race + ("b&c", "c").index(pair[1])] += cells
    counts[intersection + 4, bias.FP] = UNKNOWN  # the row without race
    counts[gender, bias.FP] += UNKNOWN
    counts[race + 2, bias.FP] = UNKNOWN
    return bias.group_metrics(counts, LAYOUT)


@pytest.fixture
def trial(demo_version: DatasetVersion, bob: User) -> Trial:
    experiment = Experiment.objects.create(
        dataset_version=demo_version,
        name="ampersands",
        template="single",
        config_yaml="",
        batches=10,
        validation_period=5,
        backend="local",
        launched_by=bob,
    )
    return Trial.objects.create(experiment=experiment, number=1, steps_planned=10)


def test_every_intersection_metric_name_decodes_to_its_own_group_and_back_to_the_pair() -> None:
    metrics = _validation_metrics()
    decoded = {metric_group(name) for name in metrics if name.startswith("recall/") or name.startswith("count/")}
    groups = {group for attribute, group in decoded if attribute == ATTRIBUTE_KEY}
    assert groups == {key for key, _, _, _ in PAIRS.values()} | {"unknown"}
    assert {split_key(key) for key in groups - {"unknown"}} == set(PAIRS)
    assert {group for attribute, group in decoded if attribute == "gender"} == {"a", "a&b", "unknown"}


def test_names_written_before_the_trainer_escaped_the_separator_read_as_before() -> None:
    assert metric_group("count/gender/a&b/tp") == ("gender", "a&b")
    assert metric_group("count/gender/a%26b/tp") == ("gender", "a&b")
    assert metric_group("count/gender&race/f&x/tp") == ("gender&race", "f&x")
    assert metric_group("recall/R%26D/N%2FA") == ("R%26D", "N/A")


def test_ingestion_stores_four_intersection_groups_and_judges_them_all(trial: Trial) -> None:
    record = MetricRecord(kind="validation", step=5, metrics=dict(_validation_metrics()))
    trial_metrics_ingest(trial=trial, records=[record])

    points = MetricPoint.objects.filter(trial=trial, attribute=ATTRIBUTE_KEY, name__startswith="count/")
    stored: dict[str, dict[str, int]] = {}
    for point in points.exclude(group="unknown"):
        assert point.value is not None
        stored.setdefault(point.group, {})[point.name.rsplit("/", 1)[1]] = int(point.value)
    assert {group: (c["tp"], c["fn"], c["fp"], c["tn"]) for group, c in stored.items()} == {
        key: cells for key, _, _, cells in PAIRS.values()
    }
    assert points.get(group="unknown").value == UNKNOWN

    verdict = TrialVerdict.objects.get(trial=trial, attribute=ATTRIBUTE_KEY)
    groups = verdict.document["groups"]
    assert {key: group["n"] for key, group in groups.items()} == {key: rows for key, rows, _, _ in PAIRS.values()}
    assert {key: tuple(group["values"]) for key, group in groups.items()} == {
        key: pair for pair, (key, _, _, _) in PAIRS.items()
    }
    assert verdict.document["columns"] == ["gender", "race"]
    assert verdict.document["unknown"] == UNKNOWN
