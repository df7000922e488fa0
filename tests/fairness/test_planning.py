"""The A/B test planner's maths, held to statsmodels' power functions and to a seeded simulation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize, proportions_ztest

from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics import planning
from auditportal.fairness.statistics.distributions import normal_quantile
from auditportal.fairness.statistics.planning import GroupInput, plan_ab_test


@pytest.mark.parametrize("rate", [0.05, 0.3, 0.5, 0.8, 0.97])
@pytest.mark.parametrize("difference", [0.01, 0.05, 0.2])
@pytest.mark.parametrize(("level", "power", "ratio"), [(0.05, 0.8, 1.0), (0.01, 0.9, 2.0), (0.0125, 0.95, 0.5)])
def test_power_and_size_match_statsmodels_normal_ind_power(
    rate: float, difference: float, level: float, power: float, ratio: float
) -> None:
    challenger = rate + difference if rate + difference <= 1 else rate - difference
    effect = planning.cohen_h(challenger, rate)
    assert effect == pytest.approx(float(proportion_effectsize(challenger, rate)), rel=1e-12)
    oracle = NormalIndPower()
    expected = float(oracle.solve_power(effect_size=effect, nobs1=None, alpha=level, power=power, ratio=ratio))
    assert planning.units_needed(effect, level=level, power=power, ratio=ratio) == pytest.approx(expected, rel=1e-6)
    for units in (10.0, expected / 3, expected, 5 * expected):
        assert planning.power_two_sided(effect, units, level=level, ratio=ratio) == pytest.approx(
            float(oracle.power(effect_size=effect, nobs1=units, alpha=level, ratio=ratio)), rel=1e-9, abs=1e-12
        )


def test_each_group_is_planned_at_alpha_over_the_groups_and_the_largest_sets_the_size() -> None:
    groups = [GroupInput("a", 0.5, 0.5), GroupInput("b", 0.3, 0.2), GroupInput("c", 0.2, 0.6)]
    plan = plan_ab_test(groups=groups, difference=0.05, alpha=0.05, power=0.8)
    assert plan.level == pytest.approx(0.05 / 3)
    oracle = NormalIndPower()
    rows = {}
    for group, planned in zip(groups, plan.groups, strict=True):
        units = oracle.solve_power(
            effect_size=proportion_effectsize(planned.challenger_rate, group.rate),
            nobs1=None,
            alpha=0.05 / 3,
            power=0.8,
        )
        assert planned.units_a == math.ceil(units)
        assert planned.rows_a == math.ceil(units / group.share)
        rows[group.name] = units / group.share
    assert plan.deciding == max(rows, key=rows.__getitem__) == "c"
    assert [group.deciding for group in plan.groups] == [False, False, True]
    assert plan.rows_a == plan.rows_b == math.ceil(rows["c"])
    assert plan.total == 2 * plan.rows_a
    deciding = plan.groups[2]
    assert deciding.power_at_plan == pytest.approx(0.8, abs=1e-3)
    assert all(group.power_at_plan > 0.8 for group in plan.groups[:2])


def test_the_challenger_is_planned_on_the_side_nearer_one_half() -> None:
    plan = plan_ab_test(
        groups=[GroupInput("low", 0.5, 0.3), GroupInput("high", 0.5, 0.95)], difference=0.1, alpha=0.05, power=0.8
    )
    assert plan.groups[0].challenger_rate == pytest.approx(0.4)  # 0.2 would need fewer rows
    assert plan.groups[1].challenger_rate == pytest.approx(0.85)  # 1.05 lies outside [0, 1]


def test_a_rate_among_positives_counts_rows_as_positives_over_share_times_prevalence() -> None:
    # TPR 0.8 in both groups; group b is a fifth of the rows and a tenth of its rows are positives.
    groups = [GroupInput("a", 0.8, 0.8, prevalence=0.5), GroupInput("b", 0.2, 0.8, prevalence=0.1)]
    plan = plan_ab_test(groups=groups, difference=0.1, alpha=0.05, power=0.8, unit="positives")
    positives = NormalIndPower().solve_power(
        effect_size=proportion_effectsize(0.7, 0.8), nobs1=None, alpha=0.025, power=0.8
    )
    a, b = plan.groups
    assert a.units_a == b.units_a == math.ceil(positives)
    assert a.rows_a == math.ceil(positives / (0.8 * 0.5))
    assert b.rows_a == math.ceil(positives / (0.2 * 0.1))
    assert plan.deciding == "b"
    assert plan.rows_a == b.rows_a
    negatives = plan_ab_test(groups=groups, difference=0.1, alpha=0.05, power=0.8, unit="negatives")
    assert negatives.groups[1].rows_a == math.ceil(positives / (0.2 * 0.9))


def test_an_uneven_split_puts_ratio_times_the_champion_arm_in_the_challenger_arm() -> None:
    groups = [GroupInput("a", 1.0, 0.4)]
    plan = plan_ab_test(groups=groups, difference=0.05, alpha=0.05, power=0.9, ratio=3.0)
    units = NormalIndPower().solve_power(
        effect_size=proportion_effectsize(0.45, 0.4), nobs1=None, alpha=0.05, power=0.9, ratio=3.0
    )
    assert plan.rows_a == math.ceil(units)
    assert plan.rows_b == math.ceil(3 * plan.rows_a)
    assert plan.groups[0].units_b == math.ceil(3 * units)


def test_the_curve_rises_with_the_total_and_crosses_the_target_at_the_plan() -> None:
    plan = plan_ab_test(
        groups=[GroupInput("a", 0.6, 0.5), GroupInput("b", 0.4, 0.1)], difference=0.05, alpha=0.05, power=0.8
    )
    totals = [point.total for point in plan.curve]
    assert totals == sorted(totals)
    assert plan.total in totals
    assert totals[-1] == pytest.approx(planning.CURVE_SPAN * plan.total, rel=0.01)
    deciding = [group.deciding for group in plan.groups].index(True)
    powers = [point.power[deciding] for point in plan.curve]
    assert all(later >= earlier for earlier, later in itertools.pairwise(powers))
    at_plan = plan.curve[totals.index(plan.total)].power[deciding]
    assert at_plan == pytest.approx(0.8, abs=1e-3)


@pytest.mark.parametrize("unit", ["rows", "positives"])
def test_a_seeded_simulation_realises_the_planned_power(unit: str) -> None:
    """Rows fall into groups at random (multinomial) and into positives at the prevalence; each
    group's comparison is then tested at alpha / G by the arcsine z-test the plan assumes, and by the
    pooled two-proportion z-test (statsmodels' proportions_ztest, the audits' score test)."""
    groups = [
        GroupInput("a", 0.55, 0.7, prevalence=0.4),
        GroupInput("b", 0.3, 0.5, prevalence=0.3),
        GroupInput("c", 0.15, 0.85, prevalence=0.2),
    ]
    plan = plan_ab_test(groups=groups, difference=0.08, alpha=0.05, power=0.8, ratio=1.0, unit=unit)
    rng = np.random.default_rng(20260430)
    draws = 2000
    shares = [group.share for group in plan.groups]
    fractions = [group.fraction for group in plan.groups]

    def arm(rows: int, rates: list[float]) -> tuple[np.ndarray, np.ndarray]:
        in_group = rng.multinomial(rows, shares, size=draws)
        units = rng.binomial(in_group, fractions)
        return rng.binomial(units, rates), units

    success_a, units_a = arm(plan.rows_a, [group.rate for group in plan.groups])
    success_b, units_b = arm(plan.rows_b, [group.challenger_rate for group in plan.groups])
    z_level = float(normal_quantile(1 - plan.level / 2))
    arcsine = (2 * np.arcsin(np.sqrt(success_b / units_b)) - 2 * np.arcsin(np.sqrt(success_a / units_a))) / np.sqrt(
        1 / units_a + 1 / units_b
    )
    realised = (np.abs(arcsine) > z_level).mean(axis=0)
    deciding = [group.deciding for group in plan.groups].index(True)
    assert abs(realised[deciding] - 0.8) <= 0.05, realised
    assert all(realised[at] >= 0.8 - 0.05 for at in range(3))
    pooled = np.array(
        [
            [
                proportions_ztest([success_b[draw, at], success_a[draw, at]], [units_b[draw, at], units_a[draw, at]])[1]
                < plan.level
                for at in range(3)
            ]
            for draw in range(500)
        ]
    ).mean(axis=0)
    assert abs(pooled[deciding] - 0.8) <= 0.05 + 2 * math.sqrt(0.16 / 500), pooled


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"groups": []}, "groups"),
        ({"groups": [GroupInput("a", 0.5, 0.5), GroupInput("b", 0.4, 0.5)]}, "groups"),
        ({"groups": [GroupInput("a", 0.5, 0.5), GroupInput("a", 0.5, 0.5)]}, "groups[1].name"),
        ({"groups": [GroupInput(" ", 1.0, 0.5)]}, "groups[0].name"),
        ({"groups": [GroupInput("a", 0.0, 0.5), GroupInput("b", 1.0, 0.5)]}, "groups[0].share"),
        ({"groups": [GroupInput("a", 0.5, 1.0), GroupInput("b", 0.5, 0.5)]}, "groups[0].rate"),
        ({"groups": [GroupInput("a", 0.5, 0.5), GroupInput("b", 0.5, -0.1)]}, "groups[1].rate"),
        ({"groups": [GroupInput("a", 1.0, 0.5)], "unit": "positives"}, "groups[0].prevalence"),
        ({"groups": [GroupInput("a", 1.0, 0.5, prevalence=1.0)], "unit": "positives"}, "groups[0].prevalence"),
        ({"unit": "cells"}, "unit"),
        ({"difference": 0.0}, "difference"),
        ({"difference": -0.1}, "difference"),
        ({"difference": 1.0}, "difference"),
        ({"difference": float("nan")}, "difference"),
        ({"groups": [GroupInput("a", 1.0, 0.5)], "difference": 0.6}, "difference"),
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.5}, "alpha"),
        ({"power": 1.0}, "power"),
        ({"power": 0.0}, "power"),
        ({"power": 0.01}, "power"),
        ({"ratio": 0.0}, "ratio"),
        ({"ratio": 1000.0}, "ratio"),
    ],
)
def test_bad_input_is_refused_naming_the_field(change: dict[str, object], field: str) -> None:
    arguments: dict[str, object] = {
        "groups": [GroupInput("a", 0.5, 0.5), GroupInput("b", 0.5, 0.5)],
        "difference": 0.05,
        "alpha": 0.05,
        "power": 0.8,
        "ratio": 1.0,
        "unit": "rows",
    }
    arguments.update(change)
    with pytest.raises(UserError) as raised:
        plan_ab_test(**arguments)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_shares_that_sum_to_one_within_rounding_are_taken_as_given_proportions() -> None:
    plan = plan_ab_test(
        groups=[GroupInput("a", 0.333, 0.5), GroupInput("b", 0.333, 0.5), GroupInput("c", 0.3335, 0.5)],
        difference=0.1,
        alpha=0.05,
        power=0.8,
    )
    assert math.fsum(group.share for group in plan.groups) == pytest.approx(1.0)
