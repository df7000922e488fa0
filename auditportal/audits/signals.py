"""Signals of the audits app, for the apps above it that must react in the same transaction without
audits importing them (docs/architecture.md, "The dependency rule")."""

from __future__ import annotations

from django.dispatch import Signal

# Evidence an approval may rest on was retired: sent by services.prediction_audit_retire inside its
# transaction, with ``audit`` (the PredictionAudit, retired), ``by`` (who retired it) and ``reason``.
# A receiver that raises undoes the retirement. The approvals app suspends the requests resting on it.
prediction_audit_retired = Signal()
