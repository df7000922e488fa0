from __future__ import annotations

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditportal.settings.base")

# filesystem:// (the embedded default) is kombu's filesystem transport whose messages appear whole
# (auditportal/lib/brokerfs.py: kombu's own lets a worker read a message before it is written).
TRANSPORT_ALIASES["filesystem"] = "auditportal.lib.brokerfs:Transport"

app = Celery("auditportal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
