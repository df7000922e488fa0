from __future__ import annotations

# Policy changes are checked against trial verdicts too: share the experiments' fixtures.
from tests.audits.conftest import predictions_csv
from tests.experiments.conftest import demo_version

__all__ = ["demo_version", "predictions_csv"]
