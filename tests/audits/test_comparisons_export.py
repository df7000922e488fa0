"""The audit page's forest plot and its comparison table as CSV: what was judged, safe to open, and
shown to whoever may see the page."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.audits.models import PredictionAudit
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.fairness.text.csvsafe import original_text
from auditportal.fairness.text.presentation import COMPARISON_COLUMNS
from tests.factories import PredictionAuditFactory, client_for

# Group names a spreadsheet would run as formulas, beside a plain one ("-1" would be an unknown value).
# "x;=1+1" is one cell here, and two in a spreadsheet that separates cells with ";".
HOSTILE = ['=HYPERLINK("http://evil.example","x")', "@SUM(1)", "-2+3", "+cmd", "x;=1+1", "plain"]


def _hostile_csv() -> str:
    lines = ["label,pred,gender"]
    for index, group in enumerate(HOSTILE):
        cell = '"' + group.replace('"', '""') + '"'
        for row in range(40 + index * 10):
            label = row % 2
            right = (row // 2) % 5 < 4 - index % 3  # groups right 4/5, 3/5 or 2/5 of the time
            lines.append(f"{label},{label if right else 1 - label},{cell}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def audit(bob: User, dataset_storage: Path) -> PredictionAudit:
    return PredictionAuditFactory.create(
        created_by=bob, content=_hostile_csv(), spec=AuditSpec(label="label", prediction="pred", attributes=("gender",))
    )


@pytest.fixture
def intersection_audit(bob: User, dataset_storage: Path) -> PredictionAudit:
    return PredictionAuditFactory.create(
        created_by=bob,
        spec=AuditSpec(label="label", prediction="pred", attributes=("gender", "age_group"), intersect=True),
    )


def _rows(client: Client, audit: PredictionAudit) -> list[dict[str, str]]:
    response = client.get(reverse("audits:prediction-comparisons-csv", args=[audit.pk]))
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.getvalue().decode())))


def test_the_csv_has_one_row_per_comparison_with_the_stored_numbers(
    intersection_audit: PredictionAudit, carol: User
) -> None:
    response = client_for(carol).get(reverse("audits:prediction-comparisons-csv", args=[intersection_audit.pk]))
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert (
        response["Content-Disposition"]
        == f'attachment; filename="prediction-audit-{intersection_audit.pk}-comparisons.csv"'
    )
    reader = csv.reader(io.StringIO(response.getvalue().decode()))
    assert tuple(next(reader)) == COMPARISON_COLUMNS
    rows = _rows(client_for(carol), intersection_audit)
    document = intersection_audit.result
    expected = [(name, item) for name, section in document["attributes"].items() for item in section["comparisons"]]
    assert len(rows) == len(expected) > 0
    assert {row["attribute"] for row in rows} == {"gender", "age_group", "gender&age_group"}
    for row, (name, item) in zip(rows, expected, strict=True):
        section = document["attributes"][name]
        assert (row["attribute"], row["metric"], row["group"], row["reference"]) == (
            name,
            item["metric"],
            item["group"],
            item["reference"],
        )
        assert json.loads(row["group_values"]) == section["groups"][item["group"]]["values"]
        assert row["verdict"] == item["verdict"]
        assert row["tolerance"] == str(document["policy"]["tolerance"])
        assert int(row["group_n"]) == section["groups"][item["group"]]["n"]
        for key in ("difference", "ci_low", "ci_high", "ratio", "ratio_low", "ratio_high", "p_adjusted"):
            assert row[key] == ("" if item[key] is None else str(item[key])), key
        if item["metric"] == "equalized_odds":
            assert row["group_rate"] == row["reference_rate"] == ""
        else:
            rate = section["groups"][item["group"]][item["metric"]]
            assert row["group_rate"] == ("" if rate is None else str(rate))
        assert row["positives_needed"] == ("" if item["positives_needed"] is None else str(item["positives_needed"]))
        assert row["judged"] == ("true" if item["judged"] else "false")


def test_group_names_that_are_formulas_are_neutralised_and_negative_numbers_are_not(
    audit: PredictionAudit, carol: User
) -> None:
    rows = _rows(client_for(carol), audit)
    groups = {row["group"] for row in rows} | {row["reference"] for row in rows}
    assert groups == {"'" + name if name[0] in "=@-+" else name.replace(";=", ";'=") for name in HOSTILE}
    assert {original_text(group) for group in groups} == set(HOSTILE)
    assert not any(cell.startswith(("=", "+", "@")) for row in rows for cell in row.values())
    # Read at ";", as a spreadsheet in a ;-locale does: no cell begins like a formula either.
    text = client_for(carol).get(reverse("audits:prediction-comparisons-csv", args=[audit.pk])).getvalue().decode()
    cells = [cell.lstrip() for row in csv.reader(io.StringIO(text, newline=""), delimiter=";") for cell in row]
    assert not [cell for cell in cells if cell.startswith(("=", "+", "@"))]
    negative = [row["difference"] for row in rows if row["difference"].startswith("-")]
    assert negative  # a negative difference is a number, written as one
    assert all(float(value) < 0 for value in negative)
    # group_values is a JSON list: it starts with "[", which no spreadsheet runs.
    assert {json.loads(original_text(row["group_values"]))[0] for row in rows} <= set(HOSTILE)


@pytest.mark.parametrize("fixture_name", ["alice", "bob", "carol", "dave", "erin", "oscar"])
def test_the_csv_is_served_to_exactly_those_who_may_see_the_page(
    audit: PredictionAudit, request: pytest.FixtureRequest, fixture_name: str
) -> None:
    client = client_for(request.getfixturevalue(fixture_name))
    page = client.get(reverse("audits:prediction", args=[audit.pk])).status_code
    export = client.get(reverse("audits:prediction-comparisons-csv", args=[audit.pk])).status_code
    assert export == page == (404 if fixture_name == "oscar" else 200)


def test_anonymous_visitors_are_sent_to_log_in_and_an_unknown_audit_is_404(audit: PredictionAudit, carol: User) -> None:
    response = Client().get(reverse("audits:prediction-comparisons-csv", args=[audit.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert client_for(carol).get(reverse("audits:prediction-comparisons-csv", args=[audit.pk + 1])).status_code == 404


def test_the_page_links_the_csv_and_carries_the_forest_plot_of_the_stored_document(
    intersection_audit: PredictionAudit, dave: User
) -> None:
    response = client_for(dave).get(reverse("audits:prediction", args=[intersection_audit.pk]))
    html = response.getvalue().decode()
    assert f'href="/audits/predictions/{intersection_audit.pk}/comparisons.csv"' in html
    start = html.index('<script id="forest-plot-data" type="application/json">')
    figure: dict[str, Any] = json.loads(html[html.index(">", start) + 1 : html.index("</script>", start)])
    drawn = {
        tuple(key): x
        for trace in figure["data"]
        if trace["mode"] != "text"
        for key, x in zip(trace["customdata"], trace["x"], strict=True)
    }
    stored = {
        (name, item["group"], item["metric"]): item["difference"]
        for name, section in intersection_audit.result["attributes"].items()
        for item in section["comparisons"]
        if item["difference"] is not None
    }
    assert drawn == stored
    assert "vendor/plotly/plotly.min.js" in html


def test_a_verdict_document_page_draws_the_documents_own_comparisons(
    intersection_audit: PredictionAudit, dave: User
) -> None:
    document = intersection_audit.verdict_documents.get()
    response = client_for(dave).get(reverse("evidence:document", args=[document.pk]))
    figure = response.context["forest_plot"]
    drawn = {tuple(key) for trace in figure["data"] for key in trace["customdata"]}
    assert drawn == {
        (name, item["group"], item["metric"])
        for name, section in document.document["audit"]["attributes"].items()
        for item in section["comparisons"]
    }
