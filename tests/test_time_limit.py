"""tests/time_limit.py: a test not marked slow that takes longer than the limit fails, naming itself."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import time_limit

REPO = Path(__file__).resolve().parents[1]


def test_the_limit_is_five_seconds_unless_set_and_zero_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PORTAL_TEST_TIME_LIMIT", raising=False)
    assert time_limit.limit_seconds() == 10.0
    monkeypatch.setenv("PORTAL_TEST_TIME_LIMIT", "2.5")
    assert time_limit.limit_seconds() == 2.5
    monkeypatch.setenv("PORTAL_TEST_TIME_LIMIT", "0")
    assert time_limit.limit_seconds() == 0.0
    for bad in ("five", "-1"):
        monkeypatch.setenv("PORTAL_TEST_TIME_LIMIT", bad)
        with pytest.raises(pytest.UsageError, match=f"PORTAL_TEST_TIME_LIMIT='{bad}'"):
            time_limit.limit_seconds()


def test_a_busy_machine_stretches_the_limit_by_its_load_per_core_and_an_idle_one_does_not() -> None:
    assert time_limit.allowed_seconds(5.0, 0.3) == 5.0
    assert time_limit.allowed_seconds(5.0, 1.0) == 5.0
    assert time_limit.allowed_seconds(5.0, 2.5) == 12.5


def test_the_message_names_the_test_its_time_and_what_to_do() -> None:
    assert time_limit.over_limit_message("tests/x.py::test_y", 7.26, 5.0, 5.0, 0.4) == (
        "tests/x.py::test_y took 7.3 s, over the 5.0 s limit for a test not marked slow: mark it slow "
        "(@pytest.mark.slow) or make it fast. PORTAL_TEST_TIME_LIMIT sets the limit (0 turns the check off)."
    )
    assert "over the 10.0 s limit (5 s times the load per core, 2.0)" in time_limit.over_limit_message(
        "tests/x.py::test_y", 11.0, 10.0, 5.0, 2.0
    )


def test_a_slow_unmarked_test_fails_and_a_marked_or_fast_one_passes(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n", encoding="utf-8")
    # An idle machine, whatever this one's load: the allowance is tested above.
    (tmp_path / "conftest.py").write_text(
        "from tests import time_limit\ntime_limit.load_per_core = lambda: 1.0\n", encoding="utf-8"
    )
    (tmp_path / "test_timed.py").write_text(
        textwrap.dedent(
            """
            import time
            import pytest

            def test_sleeps() -> None:
                time.sleep(0.35)

            @pytest.mark.slow
            def test_sleeps_marked() -> None:
                time.sleep(0.35)

            def test_fast() -> None:
                pass

            def test_fails_anyway() -> None:
                time.sleep(0.35)
                assert False, "its own failure"
            """
        ),
        encoding="utf-8",
    )
    # No plugins but this one: the installed ones (schemathesis, hypothesis...) take seconds to load.
    env = {
        **os.environ,
        "PORTAL_TEST_TIME_LIMIT": "0.3",
        "PYTHONPATH": str(REPO),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.time_limit", "-q", "-rf"]
    result = subprocess.run(
        [*command, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2 failed, 2 passed" in result.stdout
    assert "test_timed.py::test_sleeps took 0." in result.stdout
    assert "over the 0.3 s limit for a test not marked slow: mark it slow (@pytest.mark.slow)" in result.stdout
    assert "its own failure" in result.stdout  # a failing test keeps its own failure
    assert "test_sleeps_marked" not in result.stdout
