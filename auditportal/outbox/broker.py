"""The one module of the outbox that talks to Celery and its broker.

``outbox.services`` imports it only when it delivers a row: the Celery app and kombu take about 0.3 s
to import, which every process that loads the apps (and every service module that queues work)
would otherwise pay (tests/test_startup.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kombu.exceptions import KombuError
from redis.exceptions import RedisError

from auditportal.celery import app

# What a broker that is down or refuses raises: kombu wraps its transports' connection errors in
# OperationalError (a KombuError); a refused or reset socket can still surface as an OSError, and
# redis-py's own errors from a command that is not wrapped.
BROKER_ERRORS: tuple[type[BaseException], ...] = (KombuError, OSError, RedisError)


def runs_inline() -> bool:
    """Celery's eager mode (tests, CELERY_TASK_ALWAYS_EAGER): a task runs in the queuing process."""
    return bool(app.conf.task_always_eager)


def publish(*, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Hand the task ``name`` to the broker, or raise.

    By name (``send_task``): the web process needs neither the task's module nor the app that owns it,
    and routes come from CELERY_TASK_ROUTES by name. In eager mode ``send_task`` would only queue the
    message, where ``.delay()`` ran the task at once; so the registered task's ``apply_async`` runs it
    here, as ``.delay()`` did, and its errors propagate as ``task_eager_propagates`` says. A name that
    no tasks module registers raises ``celery.exceptions.NotRegistered`` there: a test catches a typo
    that a worker would only log.
    """
    if runs_inline():
        task = app.tasks.get(name)
        if task is None:
            # Outside a worker the apps' tasks modules are imported only by whoever uses them.
            app.autodiscover_tasks(force=True)
            task = app.tasks[name]
        task.apply_async(args=list(args), kwargs=dict(kwargs))
    else:
        app.send_task(name, args=list(args), kwargs=dict(kwargs))
