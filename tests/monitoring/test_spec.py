"""A monitor policy's spec (monitoring/spec.py, no Django): its JSON round trip, every bad value refused
naming it, partial changes, and which changes loosen the monitor."""

from __future__ import annotations

import math
from typing import Any

import pytest

from auditportal.monitoring.spec import METRICS, MetricLimits, MonitorSpec, SpecError, loosening_text, spec_loosenings

DEFAULT = MonitorSpec()


def test_the_defaults_watch_every_metric_with_an_fnr_of_at_most_5_percent_and_round_trip() -> None:
    data = DEFAULT.as_json()
    assert data == {
        "schema": 1,
        "limits": {
            "fnr": {"upper": 0.05, "lower": None, "gap": 0.05},
            "fpr": {"upper": None, "lower": None, "gap": 0.05},
            "selection_rate": {"upper": None, "lower": None, "gap": 0.10},
        },
        "reference": "largest",
        "share_shift": 0.10,
        "min_group_rows": 100,
        "min_batch_rows": 100,
        "alpha": 0.05,
        "horizon": 1000,
    }
    assert MonitorSpec.from_json(data) == DEFAULT
    assert MonitorSpec.from_json({}) == DEFAULT
    assert DEFAULT.watched == list(METRICS)


def _with(**values: Any) -> dict[str, Any]:
    return {**DEFAULT.as_json(), **values}


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ([], "spec", "The spec is a JSON object, not a list."),
        (_with(alpah=0.1), "alpah", "A monitor policy has no value 'alpah'"),
        (_with(schema=2), "schema", "The spec's schema is 1, not 2."),
        (_with(limits=[]), "limits", "The limits is a JSON object"),
        (_with(limits={"tpr": {"gap": 0.1}}), "limits.tpr", "A monitor watches fnr, fpr, selection_rate, not 'tpr'."),
        (_with(limits={"fnr": {"max": 0.1}}), "limits.fnr.max", "A metric's limits are upper, lower, gap, not 'max'."),
        (_with(limits={"fnr": {"upper": 1.5}}), "limits.fnr.upper", "The upper limit of fnr is a rate"),
        (_with(limits={"fnr": {"upper": -0.1}}), "limits.fnr.upper", "The upper limit of fnr is a rate"),
        (_with(limits={"fnr": {"upper": math.nan}}), "limits.fnr.upper", "The upper limit of fnr is a rate"),
        (_with(limits={"fnr": {"upper": "0.05"}}), "limits.fnr.upper", "not '0.05'"),
        (_with(limits={"fnr": {"upper": True}}), "limits.fnr.upper", "not True"),
        (_with(limits={"fpr": {"gap": 0}}), "limits.fpr.gap", "The gap limit of fpr is a rate, above 0"),
        (
            _with(limits={"selection_rate": {"lower": 0.5, "upper": 0.4}}),
            "limits.selection_rate.lower",
            "The lower limit of selection_rate (0.5) must be below its upper limit (0.4).",
        ),
        (_with(reference="smallest"), "reference", "The reference rule is one of largest, not 'smallest'."),
        (_with(share_shift=0), "share_shift", "The share shift is a rate, above 0"),
        (_with(min_group_rows=0), "min_group_rows", "The min group rows is a whole number from 1 to"),
        (_with(min_batch_rows=2.5), "min_batch_rows", "The min batch rows is a whole number"),
        (_with(alpha=0.6), "alpha", "Alpha is above 0 and at most 0.5, not 0.6."),
        (_with(alpha=0), "alpha", "Alpha is above 0"),
        (_with(horizon=0), "horizon", "The horizon is a whole number of looks from 1 to 1000000, not 0."),
        (_with(horizon=10**7), "horizon", "The horizon is a whole number of looks"),
        (
            _with(limits={metric: {"upper": None, "lower": None, "gap": None} for metric in METRICS}, share_shift=None),
            "limits",
            "A monitor policy watches something",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_it(data: Any, field: str, message: str) -> None:
    with pytest.raises(SpecError) as refused:
        MonitorSpec.from_json(data)
    assert refused.value.field == field
    assert message in str(refused.value)


def test_a_change_names_only_what_changes_and_null_clears_a_limit() -> None:
    changed = DEFAULT.changed({"limits": {"fnr": {"upper": 0.04}, "selection_rate": {"gap": None}}, "alpha": 0.1})
    assert changed.fnr == MetricLimits(upper=0.04, gap=0.05)
    assert changed.selection_rate == MetricLimits()
    assert (changed.fpr, changed.alpha, changed.horizon) == (DEFAULT.fpr, 0.1, 1000)
    assert changed.watched == ["fnr", "fpr"]
    with pytest.raises(SpecError) as refused:
        DEFAULT.changed({"limits": {"fnr": 0.04}})
    assert refused.value.field == "limits.fnr"


@pytest.mark.parametrize(
    ("changes", "loosens"),
    [
        ({"limits": {"fnr": {"upper": 0.04}}}, []),
        ({"limits": {"fnr": {"upper": 0.06}}}, ["limits.fnr.upper"]),
        ({"limits": {"fnr": {"upper": None}}}, ["limits.fnr.upper"]),
        ({"limits": {"selection_rate": {"lower": 0.2}}}, []),
        ({"limits": {"fpr": {"gap": 0.1, "upper": 0.2}}}, ["limits.fpr.gap"]),
        ({"share_shift": 0.05}, []),
        ({"share_shift": None}, ["share_shift"]),
        ({"min_group_rows": 50, "min_batch_rows": 500}, ["min_batch_rows"]),
        ({"alpha": 0.1}, []),
        ({"alpha": 0.01}, ["alpha"]),
        ({"horizon": 500}, ["horizon"]),
    ],
)
def test_what_loosens_the_monitor(changes: dict[str, Any], loosens: list[str]) -> None:
    assert spec_loosenings(DEFAULT, DEFAULT.changed(changes)) == loosens


def test_a_lower_limit_loosens_when_it_falls_or_goes() -> None:
    base = DEFAULT.changed({"limits": {"selection_rate": {"lower": 0.2}}})
    assert spec_loosenings(base, base.changed({"limits": {"selection_rate": {"lower": 0.1}}})) == [
        "limits.selection_rate.lower"
    ]
    assert spec_loosenings(base, base.changed({"limits": {"selection_rate": {"lower": 0.3}}})) == []
    assert loosening_text("limits.selection_rate.lower") == "a lower or no lower limit (lower rates pass)"
