"""approvals/0005: a waiver made when a waiver covered one comparison keeps its id and keeps working;
its one comparison is copied into its scope (WaivedComparison)."""

from __future__ import annotations

import pytest
from django.db import connection

from auditportal.accounts.models import User
from auditportal.approvals import selectors, services
from auditportal.approvals.models import ReviewRequest, WaivedComparison, Waiver
from auditportal.fairness.documents.findings import FAIL
from tests.approvals.conftest import days_from_now, in_review, keys
from tests.migrating import migrate, migrate_to_latest

BEFORE = [("approvals", "0004_votes_counted_as_cast_pauses_suspensions")]


@pytest.mark.slow  # migrates backwards and forwards over every later migration (7-23 s here)
@pytest.mark.django_db(transaction=True)
def test_an_existing_waiver_keeps_its_id_and_its_comparison_becomes_its_scope(
    unfair_trial_request: ReviewRequest, carol: User
) -> None:
    request = in_review(unfair_trial_request, carol)
    key = keys(request, FAIL)[0]
    waiver = services.waiver_propose(
        user=carol,
        request=request,
        finding_key=key,
        reason="explained by the vendor's data",
        compensating_measures="manual review",
        expires_on=days_from_now(30),
    )
    expected = list(WaivedComparison.objects.values_list("waiver_id", "finding_key", "document_id", "group"))
    migrate(BEFORE)  # as a database made before waiver sets: the waiver row alone
    try:
        with connection.cursor() as cursor:
            tables = connection.introspection.table_names(cursor)
        assert "approvals_waivedcomparison" not in tables
    finally:
        migrate_to_latest()
    assert list(WaivedComparison.objects.values_list("waiver_id", "finding_key", "document_id", "group")) == expected
    assert expected == [(waiver.pk, key, request.documents.get().pk, waiver.group)]
    copied = Waiver.objects.get(pk=waiver.pk)
    assert copied.label == "gender: tpr of female against male"
    status = next(s for s in selectors.review_request_findings(request=request) if s.finding.key == key)
    assert status.waiver == copied
