"""Prediction audits with --intersect keep groups apart whose values contain "&" (issue 11), on the
block-counting path and on the general path alike."""

from __future__ import annotations

import html
import json
import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from hypothesis import given
from hypothesis import strategies as st

from auditportal.accounts.models import User
from auditportal.audits.models import PredictionAudit
from auditportal.fairness.files.intersections import attribute_key, group_key, group_values, split_key
from auditportal.fairness.files.tabular import read_columns
from auditportal.fairness.statistics import audit, counting
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.fairness.statistics.counting import Counted
from tests.audits.test_counting import _both, _same
from tests.intersection_file import ATTRIBUTE_KEY, PAIRS, UNKNOWN, write_csv

COMMAND = ["--label", "label", "--prediction", "pred", "--attribute", "gender", "--attribute", "race", "--intersect"]
CELLS = {key: cells for key, _, _, cells in PAIRS.values()}


NAMES = st.text(alphabet="a&%2 56/", max_size=6)


@given(first=st.lists(NAMES, min_size=1, max_size=3), second=st.lists(NAMES, min_size=1, max_size=3))
def test_a_key_decodes_to_its_tuple_and_no_two_tuples_share_one(first: list[str], second: list[str]) -> None:
    assert split_key(attribute_key(first)) == tuple(first)
    assert group_values(group_key(first), len(first)) == tuple(first)
    if first != second:
        assert attribute_key(first) != attribute_key(second)
        if len(first) == len(second):
            assert group_key(first) != group_key(second)


@pytest.mark.parametrize("output", ["prediction", "score"])
def test_both_counting_paths_count_four_intersection_groups(tmp_path: Path, output: str) -> None:
    path = write_csv(tmp_path / "ampersands.csv")
    spec = AuditSpec(
        label="label",
        attributes=("gender", "race"),
        intersect=True,
        prediction="pred" if output == "prediction" else None,
        score="score" if output == "score" else None,
        threshold=0.5 if output == "score" else None,
    )
    column = "pred" if output == "prediction" else "score"
    raw = read_columns(path, spec.columns_spec(), others=[(column, output)], display_name=path.name, max_bytes=1 << 20)
    fast, general = _both(raw.table, spec)
    _same(fast, general)
    for counted in (fast, general):
        assert isinstance(counted, Counted)
        intersection = counted.tables[-1]
        assert intersection.name == ATTRIBUTE_KEY
        assert len(set(intersection.groups)) == 4, intersection.groups
        assert dict(zip(intersection.groups, map(tuple, intersection.counts.tolist()), strict=True)) == CELLS
        assert intersection.values == tuple(PAIRS)
        assert intersection.unknown == UNKNOWN


def _audit_json(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("audit_predictions", *args, "--format", "json", stdout=out)
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


@pytest.mark.django_db
@pytest.mark.parametrize("path_taken", ["block counting", "general"])
def test_the_command_reports_four_intersection_groups_with_their_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path_taken: str
) -> None:
    taken: list[bool] = []
    count_blocks = counting.count_blocks

    def counted_blocks(*args: Any, **kwargs: Any) -> Counted | None:
        result = count_blocks(*args, **kwargs) if path_taken == "block counting" else None
        taken.append(result is not None)
        return result

    monkeypatch.setattr(audit, "count_blocks", counted_blocks)
    document = _audit_json(str(write_csv(tmp_path / "ampersands.csv")), *COMMAND)
    assert taken == [path_taken == "block counting"]

    intersection = document["attributes"][ATTRIBUTE_KEY]
    assert len(intersection["groups"]) == 4, list(intersection["groups"])
    assert {
        key: (group["n"], group["positives"], (group["tp"], group["fn"], group["fp"], group["tn"]))
        for key, group in intersection["groups"].items()
    } == {key: (rows, positives, cells) for key, rows, positives, cells in PAIRS.values()}
    assert {key: tuple(group["values"]) for key, group in intersection["groups"].items()} == {
        key: pair for pair, (key, _, _, _) in PAIRS.items()
    }
    assert intersection["columns"] == ["gender", "race"]
    assert intersection["unknown"] == UNKNOWN
    assert intersection["reference"] == "a%26b&c"  # the largest group, 4 rows
    assert {c["group"] for c in intersection["comparisons"]} == {"a&b%26c", "a&c", "a%26b&b%26c"}
    assert document["attributes"]["gender"]["groups"]["a&b"]["values"] == ["a&b"]


@pytest.mark.django_db
def test_a_reference_names_an_intersection_group_by_its_key(tmp_path: Path) -> None:
    path = str(write_csv(tmp_path / "ampersands.csv"))
    document = _audit_json(path, *COMMAND, "--reference", "gender&race=a&b%26c")
    assert document["attributes"][ATTRIBUTE_KEY]["reference"] == "a&b%26c"


@pytest.mark.django_db
def test_the_result_page_shows_four_intersection_groups(tmp_path: Path, carol: User) -> None:
    _audit_json(str(write_csv(tmp_path / "ampersands.csv")), *COMMAND)
    audit_row = PredictionAudit.objects.get()
    client = Client()
    client.force_login(carol)
    page = client.get(reverse("audits:prediction", args=[audit_row.pk])).content.decode()
    section = re.search(
        r'<section class="card audit-table" data-attribute="gender&amp;race">(.*?)</section>', page, re.S
    )
    assert section is not None
    rows = re.findall(r'<tr data-group="([^"]*)"[^>]*>\s*<td>(.*?)</td>\s*<td class="num">(\d+)</td>', section.group(1))
    assert {html.unescape(key): int(n) for key, _, n in rows} == {key: n for key, n, _, _ in PAIRS.values()}
    shown = {html.unescape(key): text for key, text, _ in rows}
    assert shown["a%26b&c"] == '<code class="part">a&amp;b</code> &amp; <code class="part">c</code>'
    assert shown["a&b%26c"] == '<code class="part">a</code> &amp; <code class="part">b&amp;c</code>'
