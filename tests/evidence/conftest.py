from __future__ import annotations

# Trials need a demo dataset version and the fake trainer: share the experiments' fixtures.
from tests.experiments.conftest import demo_version, fake_trainer

__all__ = ["demo_version", "fake_trainer"]
