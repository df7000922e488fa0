"""Planning a live A/B test: how many predictions each arm needs so that every group's comparison of
the champion (arm A, in production) with the challenger (arm B) is decidable (docs/planner.md).

Method, per group g (names as in the page and the API):

* the metric is a rate (TPR, FNR, FPR, selection rate, accuracy) counted among its *units*: label
  positives (TPR, FNR), label negatives (FPR) or all rows (selection rate, accuracy). ``rate`` is the
  champion's rate in the group; the challenger is planned at ``rate + difference`` or ``rate -
  difference``, whichever lies in [0, 1] and needs more units (the one nearer 0.5), so the plan holds
  whichever way the challenger moves;
* the test: two-sided z-test on the arcsine-transformed proportions, the effect size Cohen's
  ``h = 2 asin(sqrt(p_B)) - 2 asin(sqrt(p_A))``, unpooled normal approximation (Cohen 1988,
  *Statistical Power Analysis for the Behavioral Sciences*, 2nd ed., ch. 6). Its power at ``n_A``
  units in arm A and ``n_B = ratio * n_A`` in arm B is ``Phi(|h| sqrt(m) - z) + Phi(-|h| sqrt(m) -
  z)`` with ``m = 1 / (1/n_A + 1/n_B)`` and ``z = z_{1 - level/2}``: exactly
  ``statsmodels.stats.power.NormalIndPower().power(proportion_effectsize(p_B, p_A), n_A, level, ratio)``,
  which the tests hold it to;
* the family: the G groups' comparisons share ``alpha`` by Bonferroni, each at ``level = alpha / G``,
  as a prediction audit holds a family of k comparisons (each at ``1 - alpha / k``);
* ``power`` is each group's: every group's comparison alone reaches it at the plan (the deciding
  group exactly, the others more). The chance that all G decide together is lower (at most the product
  of the groups' powers when they are independent, as the arms' disjoint rows make them);
* units to rows: group g is ``share_g`` of the rows, and a share ``fraction_g`` of its rows are the
  metric's units (1 for all rows, the group's positive rate ``prevalence_g`` for positives, ``1 -
  prevalence_g`` for negatives). So arm A needs ``n_A,g / (share_g * fraction_g)`` rows for group g; the
  arm's size is the largest of these over the groups (its group *sets the size*), rounded up, and arm B
  ``ratio`` times it. Group counts at that size are taken at their expected values: the realised
  counts vary around them (binomially), which the seeded simulation in the tests includes.

Pure Python and numpy; statsmodels is only the tests' oracle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics.distributions import normal_quantile

Unit = Literal["rows", "positives", "negatives"]
UNITS: Final[tuple[Unit, ...]] = ("rows", "positives", "negatives")
UNIT_LABELS: Final[dict[str, str]] = {
    "rows": "all rows (selection rate, accuracy)",
    "positives": "label positives (TPR, FNR)",
    "negatives": "label negatives (FPR)",
}
METHOD: Final = (
    "two-sided z-test on arcsine-transformed proportions (Cohen's h), unpooled normal approximation: "
    "Cohen (1988), Statistical Power Analysis for the Behavioral Sciences, ch. 6; as statsmodels' "
    "NormalIndPower with proportion_effectsize"
)
FAMILY: Final = "Bonferroni over the groups: each group's comparison at alpha / G"
MAX_GROUPS: Final = 50
MAX_RATIO: Final = 100.0
CURVE_POINTS: Final = 81
CURVE_SPAN: Final = 2.0  # the curve runs to twice the planned total
SHARE_SUM_TOLERANCE: Final = 0.001


@dataclass(frozen=True)
class GroupInput:
    name: str
    share: float  # of all rows
    rate: float  # the champion's rate of the compared metric among the group's units
    prevalence: float | None = None  # the share of the group's rows with a positive label


@dataclass(frozen=True)
class GroupPlan:
    name: str
    share: float
    rate: float
    challenger_rate: float  # the planned alternative
    effect_size: float  # Cohen's h, challenger minus champion
    fraction: float  # of the group's rows that are the metric's units
    units_a: int  # units the group needs in arm A (champion), rounded up
    units_b: int  # and in arm B (challenger)
    rows_a: int  # rows arm A needs for this group to get units_a, rounded up
    power_at_plan: float  # the group's power at the plan's arm sizes
    deciding: bool


@dataclass(frozen=True)
class CurvePoint:
    total: int  # predictions in both arms together
    power: tuple[float, ...]  # one per group, in the groups' order


@dataclass(frozen=True)
class Plan:
    groups: tuple[GroupPlan, ...]
    deciding: str  # the name of the group that sets the size
    rows_a: int  # predictions arm A (champion) needs
    rows_b: int  # predictions arm B (challenger) needs
    total: int
    unit: Unit
    difference: float
    alpha: float
    level: float  # each group's comparison level, alpha / G
    power: float
    ratio: float
    curve: tuple[CurvePoint, ...]
    method: str = METHOD
    family: str = FAMILY


def cohen_h(p_b: float, p_a: float) -> float:
    """Cohen's effect size for two proportions, as statsmodels' ``proportion_effectsize(p_b, p_a)``."""
    return 2 * math.asin(math.sqrt(p_b)) - 2 * math.asin(math.sqrt(p_a))


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def power_two_sided(effect_size: float, units_a: float, *, level: float, ratio: float = 1.0) -> float:
    """The power of the two-sided level ``level`` z-test at ``units_a`` units in arm A and ``ratio``
    times as many in arm B (statsmodels' ``NormalIndPower().power``)."""
    if units_a <= 0:
        return level
    z = float(normal_quantile(1 - level / 2))
    shift = abs(effect_size) * math.sqrt(units_a * ratio / (1 + ratio))
    return _phi(shift - z) + _phi(-shift - z)


def units_needed(effect_size: float, *, level: float, power: float, ratio: float = 1.0) -> float:
    """The (fractional) units arm A needs for :func:`power_two_sided` to reach ``power``
    (statsmodels' ``NormalIndPower().solve_power(..., nobs1=None)``)."""
    size = abs(effect_size)
    if size == 0:
        return math.inf
    z_level, z_power = float(normal_quantile(1 - level / 2)), float(normal_quantile(power))
    # Without the far tail the closed form; the far tail only adds power, so the answer lies below it.
    high = ((z_level + z_power) / size) ** 2 * (1 + ratio) / ratio
    low = 0.0
    for _ in range(200):
        middle = (low + high) / 2
        if power_two_sided(size, middle, level=level, ratio=ratio) < power:
            low = middle
        else:
            high = middle
        if high - low <= 1e-10 * high:
            break
    return high


def plan_ab_test(
    *,
    groups: Sequence[GroupInput],
    difference: float,
    alpha: float,
    power: float,
    ratio: float = 1.0,
    unit: str = "rows",
) -> Plan:
    """The predictions each arm needs so that every group's comparison reaches ``power`` at
    ``alpha / G`` for a true difference of ``difference`` (absolute, in the metric's rate); a
    ``UserError`` naming the field for bad input (``groups[i].share`` and the like)."""
    checked_unit = _check_inputs(groups, difference=difference, alpha=alpha, power=power, ratio=ratio, unit=unit)
    level = alpha / len(groups)
    total_share = math.fsum(group.share for group in groups)
    shares = [group.share / total_share for group in groups]
    planned: list[tuple[GroupInput, float, float, float, float, float]] = []
    for index, (group, share) in enumerate(zip(groups, shares, strict=True)):
        challenger = _challenger_rate(group.rate, difference, index)
        effect = cohen_h(challenger, group.rate)
        fraction = _fraction(group, checked_unit)
        units = units_needed(effect, level=level, power=power, ratio=ratio)
        planned.append((group, share, challenger, effect, fraction, units))
    rows_needed = [units / (share * fraction) for _, share, _, _, fraction, units in planned]
    deciding = max(range(len(planned)), key=lambda at: rows_needed[at])
    rows_a = math.ceil(rows_needed[deciding] - 1e-9)
    rows_b = math.ceil(rows_a * ratio - 1e-9)
    plans = tuple(
        GroupPlan(
            name=group.name,
            share=share,
            rate=group.rate,
            challenger_rate=challenger,
            effect_size=effect,
            fraction=fraction,
            units_a=math.ceil(units - 1e-9),
            units_b=math.ceil(units * ratio - 1e-9),
            rows_a=math.ceil(rows_needed[index] - 1e-9),
            power_at_plan=power_two_sided(effect, rows_a * share * fraction, level=level, ratio=ratio),
            deciding=index == deciding,
        )
        for index, (group, share, challenger, effect, fraction, units) in enumerate(planned)
    )
    return Plan(
        groups=plans,
        deciding=groups[deciding].name,
        rows_a=rows_a,
        rows_b=rows_b,
        total=rows_a + rows_b,
        unit=checked_unit,
        difference=difference,
        alpha=alpha,
        level=level,
        power=power,
        ratio=ratio,
        curve=_curve(plans, total=rows_a + rows_b, level=level, ratio=ratio),
    )


def _curve(groups: Sequence[GroupPlan], *, total: int, level: float, ratio: float) -> tuple[CurvePoint, ...]:
    """Each group's power against the total predictions (both arms), from a small total to
    ``CURVE_SPAN`` times the plan's, the plan's own total among the points."""
    step = CURVE_SPAN * total / (CURVE_POINTS - 1)
    totals = sorted({max(1, round(step * at)) for at in range(1, CURVE_POINTS)} | {total})
    points = []
    for point in totals:
        arm_a = point / (1 + ratio)
        points.append(
            CurvePoint(
                total=point,
                power=tuple(
                    power_two_sided(group.effect_size, arm_a * group.share * group.fraction, level=level, ratio=ratio)
                    for group in groups
                ),
            )
        )
    return tuple(points)


def _challenger_rate(rate: float, difference: float, index: int) -> float:
    candidates = [candidate for candidate in (rate + difference, rate - difference) if 0 <= candidate <= 1]
    if not candidates:
        raise UserError(
            f"A difference of {difference:g} from a rate of {rate:g} leaves [0, 1] both ways: "
            "make the difference smaller.",
            field="difference",
        )
    # The smaller |h| (the alternative nearer 0.5) needs more units: plan for it.
    return min(candidates, key=lambda candidate: abs(cohen_h(candidate, rate)))


def _fraction(group: GroupInput, unit: Unit) -> float:
    if unit == "rows":
        return 1.0
    assert group.prevalence is not None  # checked
    return group.prevalence if unit == "positives" else 1 - group.prevalence


def _finite(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UserError("Enter a number.", field=field)
    return float(value)


def _inside(value: object, field: str, what: str) -> float:
    number = _finite(value, field)
    if not 0 < number < 1:
        raise UserError(f"{what} must lie strictly between 0 and 1; got {number:g}.", field=field)
    return number


def _check_inputs(
    groups: Sequence[GroupInput], *, difference: float, alpha: float, power: float, ratio: float, unit: str
) -> Unit:
    if unit not in UNITS:
        raise UserError(f"The unit must be one of {', '.join(UNITS)}.", field="unit")
    checked_unit: Unit = unit  # type: ignore[assignment]  # narrowed by the membership test
    if not groups:
        raise UserError("Give at least one group.", field="groups")
    if len(groups) > MAX_GROUPS:
        raise UserError(f"At most {MAX_GROUPS} groups.", field="groups")
    names: set[str] = set()
    for index, group in enumerate(groups):
        if not group.name.strip():
            raise UserError("Give the group a name.", field=f"groups[{index}].name")
        if group.name in names:
            raise UserError(f"Group names must differ; {group.name!r} is given twice.", field=f"groups[{index}].name")
        names.add(group.name)
        share = _finite(group.share, f"groups[{index}].share")
        if not 0 < share <= 1:
            raise UserError(
                f"A group's share must lie above 0 and at most 1; got {share:g}.", field=f"groups[{index}].share"
            )
        _inside(group.rate, f"groups[{index}].rate", "A group's base rate")
        if checked_unit != "rows":
            if group.prevalence is None:
                raise UserError(
                    f"Counting {UNIT_LABELS[checked_unit]} needs each group's positive rate of labels.",
                    field=f"groups[{index}].prevalence",
                )
            _inside(group.prevalence, f"groups[{index}].prevalence", "A group's positive rate of labels")
    total = math.fsum(group.share for group in groups)
    if abs(total - 1) > SHARE_SUM_TOLERANCE:
        raise UserError(f"The groups' shares must sum to 1; they sum to {total:.6g}.", field="groups")
    if _finite(difference, "difference") <= 0 or difference >= 1:
        raise UserError(
            "The smallest difference that matters must lie strictly between 0 and 1 (an absolute "
            f"difference of rates); got {difference:g}.",
            field="difference",
        )
    _inside(alpha, "alpha", "Alpha")
    _inside(power, "power", "Power")
    if power <= alpha / len(groups):
        raise UserError(
            f"Power must exceed each comparison's level, alpha / {len(groups)} = {alpha / len(groups):g}.",
            field="power",
        )
    ratio = _finite(ratio, "ratio")
    if not 1 / MAX_RATIO <= ratio <= MAX_RATIO:
        raise UserError(
            f"The arm split (challenger predictions per champion prediction) must lie between "
            f"{1 / MAX_RATIO:g} and {MAX_RATIO:g}; got {ratio:g}.",
            field="ratio",
        )
    return checked_unit
