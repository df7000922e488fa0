from __future__ import annotations

from typing import Any

import numpy as np
from django.db.models import QuerySet
from django.http import Http404

from auditportal.accounts.models import User
from auditportal.audits import rules
from auditportal.audits.models import PredictionAudit, QueuedPredictionAudit, WhatIf
from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics import whatif


def prediction_audit_list(*, user: User) -> QuerySet[PredictionAudit]:
    # Every member may read every audit; an account without a role sees none.
    if not rules.can_read(user):
        return PredictionAudit.objects.none()
    return PredictionAudit.objects.select_related("created_by", "retired_by", "policy").order_by("-created_at", "-id")


def prediction_audit_get(*, user: User, audit_id: int) -> PredictionAudit:
    try:
        return prediction_audit_list(user=user).get(pk=audit_id)
    except PredictionAudit.DoesNotExist:
        raise Http404("No such audit.") from None


def queued_prediction_audit_get(*, user: User, queued_id: str) -> QueuedPredictionAudit:
    """A queued audit, for the account that queued it only (it holds that account's file until the
    audit is made); 404 for everyone else."""
    try:
        return QueuedPredictionAudit.objects.select_related("audit").get(pk=queued_id, owner_id=user.pk)
    except (QueuedPredictionAudit.DoesNotExist, ValueError):
        raise Http404("No such queued audit.") from None


def whatif_list(*, user: User) -> QuerySet[WhatIf]:
    """What-ifs are read as audits are: by every member (their exploration can be shared)."""
    if not rules.can_read(user):
        return WhatIf.objects.none()
    return WhatIf.objects.select_related("created_by", "policy").order_by("-created_at", "-id")


def whatif_get(*, user: User, whatif_id: int) -> WhatIf:
    try:
        return whatif_list(user=user).get(pk=whatif_id)
    except WhatIf.DoesNotExist:
        raise Http404("No such what-if.") from None


def whatif_answer(*, item: WhatIf, thresholds: whatif.Thresholds) -> dict[str, Any]:
    """The audit document at ``thresholds``, with the accuracy (ThresholdError for a bad threshold).
    Judged under the policy the what-if started with, which its document names."""
    if not item.is_ready:
        raise UserError("This what-if is not prepared yet.")
    return whatif.answer_at(whatif_load(item=item), thresholds, policy=item.policy.as_document())


def whatif_suggestion(*, item: WhatIf, attribute: str | None = None) -> dict[str, Any]:
    prepared = whatif_load(item=item)
    key = attribute or prepared.attributes[0][0]
    if key not in prepared.attribute_keys:
        names = ", ".join(repr(name) for name in prepared.attribute_keys)
        raise UserError(f"{key!r} is not an attribute of this what-if (attributes: {names})", field="attribute")
    return whatif.suggest(prepared, attribute=key).as_json()


def whatif_load(*, item: WhatIf) -> whatif.Prepared:
    """The prepared data, its scores memory-mapped: a threshold change reads a few pages of them."""
    scores = np.load(item.scores_file, mmap_mode="r", allow_pickle=False)
    return whatif.Prepared.from_meta(item.prepared, scores)
