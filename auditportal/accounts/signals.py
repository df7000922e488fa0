"""Signals of the accounts app, for the apps above it that must react to a change in the same
transaction without accounts importing them (docs/architecture.md, "The dependency rule")."""

from __future__ import annotations

from django.dispatch import Signal

# Sent by accounts.services.role_grant and role_revoke inside their transaction, once a grant was
# made or removed, with ``user``, ``role`` (a Role), ``change`` ("granted" or "revoked") and ``by``
# (who changed it, or None). A receiver that raises undoes the change. The approvals app pauses the
# open review rounds this person voted in or could vote in (docs/approvals.md).
role_changed = Signal()
