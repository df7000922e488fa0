"""The portal's project package.

The Celery app (auditportal.celery) is not imported here, where every process would pay for it: the
web server, the worker and each management command, such as a CI pipeline's ``audit_predictions``.
The task modules bind their tasks to it, and ``celery -A auditportal`` finds it by name.
"""

# The code version verdict documents record (docs/verdict-documents.md); kept equal to pyproject.toml's.
__version__ = "0.1.0"
