from __future__ import annotations

import pytest

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from tests.activity.chain_helpers import record

# The event-verb test drives experiments too: share their fixtures rather than copy them.
from tests.experiments.conftest import demo_version, fake_trainer

__all__ = ["demo_version", "fake_trainer"]


@pytest.fixture
def chain(erin: User) -> list[Event]:
    """Five events after whatever migrating wrote (fairness policy v1's event)."""
    record(erin, 5)
    return list(Event.objects.order_by("seq"))
