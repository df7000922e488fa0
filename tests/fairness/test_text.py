from __future__ import annotations

from auditportal.fairness.text.sizes import human_size


def test_human_size_picks_a_readable_unit() -> None:
    assert human_size(512) == "512 bytes"
    assert human_size(1023) == "1023 bytes"
    assert human_size(3 * 1024**2) == "3.0 MiB"
    assert human_size(2 * 1024**3) == "2.0 GiB"
    assert human_size(5 * 1024**5) == "5120.0 TiB"
