"""A look's points (fairness/figures/lookpoints): what the deployment page's charts draw, written by
look_write from the judgements it stores, read back equal to them, and back-filled by the migration
that added them."""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
import pytest
from django.apps import apps

from auditportal.accounts.models import User
from auditportal.fairness.figures.lookpoints import FIELDS, STATUSES, look_lines, look_points, points_lines
from auditportal.fairness.statistics.sequential import Status
from auditportal.monitoring.models import Deployment, Look
from tests.monitoring.test_pages import _counted, serving

__all__ = ["serving"]

pytestmark = pytest.mark.django_db


def _expected(judgements: dict[str, Any]) -> dict[tuple[str, ...], list[Any]]:
    """Each line's values, read straight from the judgements JSON (status as its name)."""
    found: dict[tuple[str, ...], list[Any]] = {}
    for attribute, judgement in judgements.items():
        for rate in judgement["rates"]:
            key = ("rate", attribute, rate["metric"], rate["bound"], rate["group"])
            found[key] = [rate[name] for name in FIELDS["rate"]]
        for gap in judgement["gaps"]:
            found[("gap", attribute, gap["metric"], gap["reference"], gap["group"])] = [
                gap[name] for name in FIELDS["gap"]
            ]
        drift = judgement["drift"]
        for share in drift["findings"]:
            qualifier = "unknown" if share["unknown"] else "unseen" if share["status"] == "unseen" else ""
            key = ("share", attribute, "share", qualifier, "unknown" if share["unknown"] else share["group"])
            found[key] = [
                share["production_share"],
                share["training_share"],
                share["production"]["low"],
                share["production"]["high"],
                drift["limit"],
                share["status"],
            ]
    return found


def _read(deployment: Deployment) -> dict[int, dict[tuple[str, ...], list[Any]]]:
    """Per look, each line's values as the page reads them back from the stored points."""
    rows = [
        (seq, layout, points)
        for seq, layout, points in deployment.looks.order_by("seq").values_list("seq", "points_layout", "points")
        if points is not None
    ]
    looks: dict[int, dict[tuple[str, ...], list[Any]]] = {}
    for line in points_lines(rows):
        for at, seq in enumerate(line.seq.tolist()):
            values = [line.values[name][at] for name in FIELDS[line.key[0]]]
            status = values.pop()
            looks.setdefault(seq, {})[line.key] = [
                *(None if math.isnan(value) else float(value) for value in values),
                None if math.isnan(status) else STATUSES[int(status)],
            ]
    return looks


def test_every_status_has_a_code() -> None:
    assert set(STATUSES) == {status.value for status in Status}


def test_the_points_read_back_equal_the_judgements_of_each_look(serving: Deployment, bob: User) -> None:
    for index in range(4):
        _counted(serving, bob, index, women_fn=index)
    judgements = dict(serving.looks.values_list("seq", "judgements"))
    assert len(judgements) == 4
    assert _read(serving) == {seq: _expected(stored) for seq, stored in judgements.items()}


def test_a_missing_value_is_a_gap_and_an_unseen_group_a_line_of_its_own() -> None:
    judgements = {
        "age": {
            "rates": [{"metric": "fnr", "bound": "at_most", "group": "old", "estimate": None, "low": 0.0,
                       "high": 1.0, "limit": 0.05, "boundary": None, "status": "too_few"}],
            "gaps": [],
            "drift": {"limit": 0.1, "findings": [
                {"group": "new", "unknown": False, "status": "unseen", "production_share": 0.2,
                 "training_share": None, "production": {"low": 0.1, "high": 0.3}},
            ]},
        }
    }  # fmt: skip
    lines = dict(look_lines(judgements))
    rate = lines[("rate", "age", "fnr", "at_most", "old")]
    assert math.isnan(rate[0])
    assert math.isnan(rate[4])
    assert rate[5] == STATUSES.index("too_few")
    share = lines[("share", "age", "share", "unseen", "new")]
    assert share[0] == 0.2
    assert math.isnan(share[1])
    assert share[4] == 0.1
    points = look_points(judgements)
    assert np.frombuffer(points.values).size == len(FIELDS["rate"]) + len(FIELDS["share"])


def test_a_group_that_comes_and_goes_is_one_line_across_layouts() -> None:
    def look(groups: list[str]) -> dict[str, Any]:
        findings = [
            {"group": group, "unknown": False, "status": "within", "production_share": 0.5,
             "training_share": 0.5, "production": {"low": 0.4, "high": 0.6}}
            for group in groups
        ]  # fmt: skip
        return {"a": {"rates": [], "gaps": [], "drift": {"limit": 0.1, "findings": findings}}}

    rows = []
    for seq, groups in enumerate([["f"], ["f", "x"], ["f"]], start=1):
        points = look_points(look(groups))
        rows.append((seq, points.layout, points.values))
    lines = {line.key[4]: line for line in points_lines(rows)}
    assert lines["f"].seq.tolist() == [1, 2, 3]
    assert lines["x"].seq.tolist() == [2]


def test_the_migration_back_fills_the_points_of_existing_looks(serving: Deployment, bob: User) -> None:
    for index in range(3):
        _counted(serving, bob, index)
    written = {seq: bytes(points or b"") for seq, points in serving.looks.values_list("seq", "points")}
    Look.objects.update(points=None, points_layout="")
    migration = importlib.import_module("auditportal.monitoring.migrations.0005_look_points")
    migration.fill_points(apps, None)
    filled = {seq: bytes(points or b"") for seq, points in serving.looks.values_list("seq", "points")}
    assert filled == written
    assert all(written.values())
    assert not Look.objects.filter(points_layout="").exists()


def test_the_page_reads_a_look_without_points_from_its_judgements(serving: Deployment, bob: User) -> None:
    from auditportal.monitoring import selectors

    for index in range(3):
        _counted(serving, bob, index)
    before = selectors.deployment_charts(deployment=serving).figures
    Look.objects.filter(seq=2).update(points=None, points_layout="")
    assert selectors.deployment_charts(deployment=serving).figures == before
