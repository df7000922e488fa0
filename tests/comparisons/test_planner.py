"""The A/B test planner's page and API: a plan for members, refusals naming the field, hostile group
names shown as text."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from django.urls import reverse
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

from auditportal.accounts.models import User
from auditportal.comparisons.planner_forms import ROWS
from auditportal.fairness.files.tabular import DatasetSpec
from tests.factories import DatasetVersionFactory, client_for

HOSTILE = '<script>alert("x")</script>'


def _page_query(groups: list[tuple[str, str, str, str]], **changes: str) -> dict[str, str]:
    query = {
        "difference": "0.05",
        "alpha": "0.05",
        "power": "0.8",
        "ratio": "1",
        "unit": "rows",
        "group-TOTAL_FORMS": str(ROWS),
        "group-INITIAL_FORMS": "0",
        "group-MIN_NUM_FORMS": "0",
        "group-MAX_NUM_FORMS": str(ROWS),
    }
    for index, (name, share, rate, prevalence) in enumerate(groups):
        query.update(
            {
                f"group-{index}-name": name,
                f"group-{index}-share": share,
                f"group-{index}-rate": rate,
                f"group-{index}-prevalence": prevalence,
            }
        )
    query.update(changes)
    return query


def _api_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "groups": [{"name": "a", "share": 0.7, "rate": 0.5}, {"name": "b", "share": 0.3, "rate": 0.5}],
        "difference": 0.05,
        "alpha": 0.05,
        "power": 0.8,
    }
    body.update(changes)
    return body


def _post(user: User, body: Any) -> Any:
    return client_for(user).post(reverse("api-comparisons-plan"), json.dumps(body), content_type="application/json")


def test_the_page_without_a_question_shows_the_form_with_the_policys_alpha(bob: User) -> None:
    response = client_for(bob).get(reverse("comparisons:planner"))
    assert response.status_code == 200
    assert b'id="plan-form"' in response.content
    assert b'id="plan-result"' not in response.content
    assert b'name="alpha" value="0.05"' in response.content


def test_the_page_plans_and_names_the_group_that_sets_the_size(bob: User) -> None:
    query = _page_query([("big", "0.8", "0.5", ""), (HOSTILE, "0.2", "0.5", "")])
    response = client_for(bob).get(reverse("comparisons:planner"), query)
    assert response.status_code == 200
    body = response.content.decode()
    units = NormalIndPower().solve_power(
        effect_size=proportion_effectsize(0.55, 0.5), nobs1=None, alpha=0.025, power=0.8
    )
    rows = math.ceil(units / 0.2)
    assert f'<strong id="plan-champion">{rows:,}</strong>' in body
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in body
    assert HOSTILE not in body
    assert 'id="plan-curve-data"' in body
    figure = response.context["figure"]
    assert len(figure["data"]) == 2
    assert "&lt;script&gt;" in figure["data"][1]["name"]


@pytest.mark.parametrize(
    ("groups", "changes", "where", "message"),
    [
        ([("a", "0.5", "0.5", ""), ("b", "0.4", "0.5", "")], {}, "groups", "The groups&#x27; shares must sum to 1"),
        ([("a", "0.5", "1", ""), ("b", "0.5", "0.5", "")], {}, "group-0-rate", "must lie strictly between 0 and 1"),
        ([("a", "1", "0.5", "")], {"difference": "0"}, "difference", "The smallest difference that matters"),
        ([("a", "1", "0.5", "")], {"power": "1"}, "power", "Power must lie strictly between 0 and 1"),
        ([("a", "1", "0.5", "")], {"unit": "positives"}, "group-0-prevalence", "positive rate of labels"),
        ([("a", "1", "", "")], {}, "group-0-rate", "Enter a value, or clear the row."),
    ],
)
def test_the_page_shows_a_refusal_on_the_field_at_fault(
    bob: User, groups: list[tuple[str, str, str, str]], changes: dict[str, str], where: str, message: str
) -> None:
    response = client_for(bob).get(reverse("comparisons:planner"), _page_query(groups, **changes))
    assert response.status_code == 400
    body = response.content.decode()
    assert message in body
    assert 'id="plan-result"' not in body
    if where == "groups":
        assert response.context["formset"].non_form_errors()
    elif where.startswith("group-"):
        index, name = where.split("-")[1:]
        assert response.context["formset"].forms[int(index)].errors[name]
    else:
        assert response.context["form"].errors[where]


def test_an_account_without_a_role_may_not_plan(oscar: User) -> None:
    assert client_for(oscar).get(reverse("comparisons:planner")).status_code == 403
    assert _post(oscar, _api_body()).status_code == 403


def test_the_api_answers_per_group_sizes_the_deciding_group_the_arms_and_the_curve(bob: User) -> None:
    body = _api_body(
        groups=[
            {"name": "a", "share": 0.6, "rate": 0.8, "prevalence": 0.5},
            {"name": HOSTILE, "share": 0.4, "rate": 0.8, "prevalence": 0.1},
        ],
        unit="positives",
        ratio=2,
    )
    response = _post(bob, body)
    assert response.status_code == 200, response.json()
    answer = response.json()
    units = NormalIndPower().solve_power(
        effect_size=proportion_effectsize(0.75, 0.8), nobs1=None, alpha=0.025, power=0.8, ratio=2
    )
    assert [group["units_champion"] for group in answer["groups"]] == [math.ceil(units)] * 2
    assert answer["deciding"] == HOSTILE
    assert answer["champion"] == math.ceil(units / (0.4 * 0.1))
    assert answer["challenger"] == 2 * answer["champion"]
    assert answer["level"] == pytest.approx(0.025)
    assert len(answer["curve"]) > 10
    assert all(len(point["power"]) == 2 for point in answer["curve"])
    assert "Cohen" in answer["method"]
    assert "Bonferroni" in answer["family"]


def test_the_api_takes_alpha_from_the_active_policy_when_left_out(bob: User) -> None:
    body = _api_body()
    del body["alpha"]
    response = _post(bob, body)
    assert response.status_code == 200
    assert response.json()["alpha"] == 0.05


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"groups": [{"name": "a", "share": 0.5, "rate": 0.5}, {"name": "b", "share": 0.2, "rate": 0.5}]}, "groups"),
        (
            {"groups": [{"name": "a", "share": 0.5, "rate": 0.5}, {"name": "b", "share": 0.5, "rate": 1.2}]},
            "groups[1].rate",
        ),
        ({"difference": 0}, "difference"),
        ({"power": 1.5}, "power"),
        ({"alpha": 0}, "alpha"),
        ({"ratio": 0}, "ratio"),
        ({"unit": "positives"}, "groups[0].prevalence"),
    ],
)
def test_the_api_refuses_bad_input_naming_the_field(bob: User, changes: dict[str, Any], field: str) -> None:
    response = _post(bob, _api_body(**changes))
    assert response.status_code == 400
    assert response.json()["field"] == field


@pytest.mark.parametrize(
    ("body", "field"),
    [({}, "groups"), (_api_body(difference="much"), "difference"), (_api_body(unit="cells"), "unit")],
)
def test_the_api_refuses_a_malformed_body_naming_the_field(bob: User, body: dict[str, Any], field: str) -> None:
    response = _post(bob, body)
    assert response.status_code == 400
    assert field in response.json()


@pytest.mark.parametrize("value", ["nan", "inf", "-1e400", "\x00", "x" * 300, "1" * 400, ""])
@pytest.mark.parametrize("field", ["difference", "alpha", "power", "ratio", "unit", "group-0-name", "group-0-share"])
def test_the_page_answers_bad_values_with_a_form_error_never_a_server_error(bob: User, field: str, value: str) -> None:
    query = _page_query([("a", "0.5", "0.5", ""), ("b", "0.5", "0.4", "")], **{field: value})
    response = client_for(bob).get(reverse("comparisons:planner"), query)
    if field == "group-0-name" and value in {"nan", "inf", "-1e400", "1" * 400}:
        # Names, not numbers: plain names, but "1" * 400 is longer than a name may be.
        assert response.status_code == (400 if len(value) > 200 else 200)
        return
    assert response.status_code == 400
    assert b'id="plan-result"' not in response.content


@pytest.mark.usefixtures("dataset_storage")
def test_a_dataset_versions_groups_prefill_names_shares_and_positive_rates(bob: User) -> None:
    version = DatasetVersionFactory.create(
        content="approved,gender\n1,F\n0,F\n1,F\n0,F\n1,M\n1,M\n0,M\n1,M\n1,unknown\n",
        spec=DatasetSpec(label="approved", positive="1", attributes=("gender",), unknown_tokens=("unknown",)),
    )
    response = client_for(bob).get(reverse("comparisons:planner"), {"version": str(version.pk), "attribute": "gender"})
    assert response.status_code == 200
    initial = [form.initial for form in response.context["formset"].forms if form.initial]
    assert initial == [
        {"name": "F", "share": 0.5, "prevalence": 0.5},
        {"name": "M", "share": 0.5, "prevalence": 0.75},
    ]
    assert b'id="plan-prefill"' in response.content


def test_a_dataset_version_the_user_cannot_see_or_a_bad_id_is_a_404(bob: User) -> None:
    assert client_for(bob).get(reverse("comparisons:planner"), {"version": "99999"}).status_code == 404
    assert client_for(bob).get(reverse("comparisons:planner"), {"version": "x1"}).status_code == 404
