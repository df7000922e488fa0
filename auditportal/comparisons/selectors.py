from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from auditportal.accounts.models import User
from auditportal.comparisons import rules
from auditportal.comparisons.models import PairedComparison


def comparison_list(*, user: User) -> QuerySet[PairedComparison]:
    """Every comparison for a member (as every audit); none for an account without a role."""
    if not rules.can_read(user):
        return PairedComparison.objects.none()
    return PairedComparison.objects.select_related("created_by", "policy").order_by("-created_at", "-id")


def comparison_get(*, user: User, comparison_id: int) -> PairedComparison:
    try:
        return comparison_list(user=user).get(pk=comparison_id)
    except PairedComparison.DoesNotExist:
        raise Http404("No such comparison.") from None
