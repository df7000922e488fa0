"""Signals of the datasets app, for the apps above it that must react in the same transaction without
datasets importing them (docs/architecture.md, "The dependency rule")."""

from __future__ import annotations

from django.dispatch import Signal

# Evidence an approval may rest on was retired: sent by services.dataset_version_retire inside its
# transaction, with ``version`` (the DatasetVersion, retired), ``by`` (who retired it) and ``reason``.
# A receiver that raises undoes the retirement. The approvals app suspends the requests whose trials
# were trained on it.
dataset_version_retired = Signal()
