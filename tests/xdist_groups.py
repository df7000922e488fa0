"""pytest-xdist's ``xdist_group`` marker, as it is meant to work, under pytest 9.

``--dist loadgroup`` sends the tests of one group to one worker: xdist 3.8 marks a test's group by
appending ``@<group>`` to ``item._nodeid`` in each worker, and its scheduler reads the group from the
node id. Two things lost the mark: pytest 9 builds the node id from ``item._id`` (a structured NodeId)
and no longer reads ``_nodeid``; and xdist's hook runs before a conftest's, so a group that a
conftest's ``pytest_collection_modifyitems`` adds (the browser tests', tests/browser/conftest.py) was
never seen. Every group's tests were dealt out one by one, the fixtures built once per group (a
module's trained checkpoint, the fuzzer's portal) were built on both workers, and two tests with the
same node id ran once. Here, after every other hook, each grouped test's node id gets its group as
xdist would write it. tests/test_xdist_groups.py holds it (pytest and xdist are pinned by
requirements.lock).
"""

from __future__ import annotations

import pytest
from _pytest.nodeid import NodeId


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # In an xdist worker of a --dist loadgroup run (xdist sets the option there only).
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        if not groups:
            continue
        suffix = "@" + "_".join(sorted(groups))
        if not item.nodeid.endswith(suffix):  # (an xdist whose own mark took)
            item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]
