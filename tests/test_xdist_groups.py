"""The suite's node ids: unique, and under ``--dist loadgroup`` (``make test``) each grouped test's
carries its group, which is how xdist deals a group to one worker (tests/xdist_groups.py)."""

from __future__ import annotations

from collections import Counter

import pytest


def test_no_two_collected_tests_share_a_node_id(request: pytest.FixtureRequest) -> None:
    counts = Counter(item.nodeid for item in request.session.items)
    assert [nodeid for nodeid, count in counts.items() if count > 1] == []


def test_under_loadgroup_each_grouped_test_carries_its_group_in_its_node_id(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run with --dist loadgroup (make test runs with it)")
    grouped = {
        item.nodeid: mark.args[0]
        for item in request.session.items
        for mark in [item.get_closest_marker("xdist_group")]
        if mark is not None
    }
    assert grouped, "no test of this run is in an xdist group"
    assert {nodeid for nodeid, group in grouped.items() if not nodeid.endswith(f"@{group}")} == set()
