from __future__ import annotations

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "auditportal.approvals"
    label = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        # The lower apps send these inside their transactions; approvals reacts in the same one
        # (a role change pauses open rounds; retired evidence suspends what rests on it).
        from auditportal.accounts.signals import role_changed
        from auditportal.approvals import receivers
        from auditportal.audits.signals import prediction_audit_retired
        from auditportal.datasets.signals import dataset_version_retired

        role_changed.connect(receivers.on_role_changed, dispatch_uid="approvals.role_changed")
        prediction_audit_retired.connect(
            receivers.on_prediction_audit_retired, dispatch_uid="approvals.prediction_audit_retired"
        )
        dataset_version_retired.connect(
            receivers.on_dataset_version_retired, dispatch_uid="approvals.dataset_version_retired"
        )
