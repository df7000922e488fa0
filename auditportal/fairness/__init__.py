"""The Django-free fairness core: reading and validating tabular files, sharding, counting, the
statistics and the audit document. It imports no Django and no portal app (import-linter checks it);
the apps import it."""
