"""Verdicts stored before TrialVerdict.noise_floor existed get it from their documents on migrating."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import transaction

from auditportal.experiments.models import TrialVerdict
from auditportal.experiments.verdicts import trial_verdicts_update
from auditportal.fairness.statistics.judge import recall_noise_floor
from tests.factories import TrialFactory
from tests.migrating import historical_state, migrate, migrate_to_latest

BEFORE = [("experiments", "0006_trial_verdict_policy")]
AFTER = [("experiments", "0007_dashboard_series_index_and_noise_floor")]


@pytest.mark.slow  # migrates backwards and forwards over every later migration (7-23 s here)
@pytest.mark.django_db(transaction=True)
def test_the_migration_fills_the_noise_floor_of_stored_verdicts(dataset_storage: Path) -> None:
    trial = TrialFactory.create()
    metrics = {"count/gender/unknown": 0.0}
    for group, cells in {"f": (60, 40, 10, 90), "m": (600, 400, 100, 900)}.items():
        for cell, value in zip(("tp", "fn", "fp", "tn"), cells, strict=True):
            metrics[f"count/gender/{group}/{cell}"] = float(value)
    with transaction.atomic():
        (verdict,) = trial_verdicts_update(trial=trial, step=5, metrics=metrics)
    expected = recall_noise_floor(verdict.document)
    assert expected is not None
    migrate(BEFORE)
    try:
        OldVerdict = historical_state(BEFORE).apps.get_model("experiments", "TrialVerdict")
        assert not hasattr(OldVerdict.objects.get(pk=verdict.pk), "noise_floor")
    finally:
        migrate(AFTER)
        migrate_to_latest()  # back to the latest schema, which the tests after this one use
    assert TrialVerdict.objects.get(pk=verdict.pk).noise_floor == expected
