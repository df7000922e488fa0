"""When the deployment page warns (monitoring/alerts.py, docs/monitoring.md "The deployment page")."""

from __future__ import annotations

from auditportal.fairness.statistics.monitor import MonitorPolicy, RateLimit, WindowCounts, judge_look
from auditportal.monitoring.alerts import NEAR_FRACTION, look_alerts, near
from tests.monitoring.breaching import breaching_look


def test_the_rule_is_a_fraction_of_the_limit_on_its_allowed_side() -> None:
    assert NEAR_FRACTION == 0.2
    assert near(0.04, 0.05)
    assert near(0.06, 0.05)
    assert not near(0.0399, 0.05)
    assert near(0.36, 0.3, bound="at_least")
    assert not near(0.361, 0.3, bound="at_least")
    assert not near(None, 0.05)
    assert not near(0.04, None)


def test_a_group_near_its_fnr_limit_is_an_alert_and_one_far_from_it_is_not() -> None:
    policy = MonitorPolicy(groups=("men", "women"), rate_limits=(RateLimit("fnr", 0.05),), min_rows=50)
    judgement = judge_look(
        policy, {"women": WindowCounts(tp=955, fn=45, fp=10, tn=90), "men": WindowCounts(tp=980, fn=20, fp=10, tn=90)}
    )
    alerts = look_alerts({"gender": judgement.as_json()})
    assert [(alert.level, alert.group, alert.metric) for alert in alerts] == [("near", "women", "fnr")]
    assert alerts[0].value == 0.045
    assert alerts[0].limit == 0.05
    assert alerts[0].metric_label == "False-negative rate"


def test_a_confirmed_breach_comes_first_and_too_few_rows_never_alert() -> None:
    alerts = look_alerts({"gender": breaching_look().as_json()})
    assert alerts[0].level == "breach"
    assert alerts[0].group == "women"
    policy = MonitorPolicy(groups=("men", "women"), rate_limits=(RateLimit("fnr", 0.05),), min_rows=5000)
    judgement = judge_look(policy, {"women": WindowCounts(tp=5, fn=5)})
    assert look_alerts({"gender": judgement.as_json()}) == []


def test_a_group_unseen_in_training_is_an_alert() -> None:
    from auditportal.fairness.statistics.monitor import DriftLimit

    policy = MonitorPolicy(
        groups=("men", "women"), drift=DriftLimit(limit=0.1, training={"men": 500, "women": 500}), min_rows=10
    )
    judgement = judge_look(
        policy, {"men": WindowCounts(tn=50), "women": WindowCounts(tn=45), "<robots>": WindowCounts(tn=5)}
    )
    unseen = [alert for alert in look_alerts({"gender": judgement.as_json()}) if alert.level == "unseen"]
    assert [alert.group for alert in unseen] == ["<robots>"]
    assert unseen[0].value == 0.05
