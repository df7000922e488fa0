"""Experiment settings: training backend, Determined credentials, Celery beat schedule.

Imported at the end of ``base.py``; plain module-level names, parsed strictly from the environment.
"""

from __future__ import annotations
