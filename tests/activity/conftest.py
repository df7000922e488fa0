from __future__ import annotations

# The event-verb test drives experiments too: share their fixtures rather than copy them.
from tests.experiments.conftest import demo_version, fake_trainer

__all__ = ["demo_version", "fake_trainer"]
