"""A paired comparison's document taken to the committee: the request says "challenger B replaces
champion A" (the model approved is the challenger), a WORSE group is a FAIL finding that blocks approval
until waived, INCONCLUSIVE groups are acknowledged, and the gate answers for the challenger as for any
model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from django.test import Client

from auditportal.accounts.models import User
from auditportal.approvals import selectors, services
from auditportal.approvals.context import review_request_context
from auditportal.approvals.models import RequestState, ReviewRequest, SubjectKind
from auditportal.comparisons import services as comparison_services
from auditportal.comparisons.models import PairedComparison
from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE
from auditportal.fairness.statistics.paired_file import PairedSpec
from tests.approvals.conftest import hashes, in_review, keys, vote, waive_all


def worse_for_one_group_csv(path: Path, *, rows: int = 3000, champion: str = "model_a", challenger: str = "model_b",
                            groups: tuple[str, str, str] = ("f", "m", "x")) -> Path:  # fmt: skip
    """The challenger right more often for the first group, much less often for the second, and a
    third group of 40 rows too small to tell."""
    rng = np.random.default_rng(7)
    first, second, small = groups
    gender = np.where(np.arange(rows) < 40, small, rng.choice([first, second], rows))
    label = rng.integers(0, 2, rows)
    right_a = np.where(gender == second, 0.9, 0.75)
    right_b = np.where(gender == first, 0.9, np.where(gender == second, 0.6, 0.75))
    a = np.where(rng.random(rows) < right_a, label, 1 - label)
    b = np.where(rng.random(rows) < right_b, label, 1 - label)
    lines = [f"label,{champion},{challenger},gender"]
    lines += [f"{label[i]},{a[i]},{b[i]},{gender[i]}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def paired_document(user: User, tmp_path: Path) -> tuple[PairedComparison, VerdictDocument]:
    source = worse_for_one_group_csv(tmp_path / "challenger.csv")
    comparison = comparison_services.comparison_create(
        user=user,
        source=source,
        original_name="challenger.csv",
        spec=PairedSpec.from_input(label="label", attributes="gender", champion="model_a", challenger="model_b"),
    )
    return comparison, VerdictDocument.objects.get(paired_comparison=comparison)


@pytest.fixture
def paired_request(bob: User, tmp_path: Path) -> ReviewRequest:
    _, document = paired_document(bob, tmp_path)
    return services.review_request_create(
        user=bob, title="Scoring model B", intended_use="Replace model A in loan pre-screening", documents=[document]
    )


@pytest.mark.django_db
def test_the_request_says_the_challenger_replaces_the_champion_and_approves_the_challenger(
    paired_request: ReviewRequest,
) -> None:
    request = paired_request
    assert request.subject_kind == SubjectKind.PAIRED_COMPARISON
    assert request.paired_comparison is not None
    assert request.model_identifier == "model_b"
    assert request.claim == "challenger model_b replaces champion model_a"
    assert request.subject_label == f"paired comparison #{request.paired_comparison_id}"
    assert request.policy_id == request.paired_comparison.policy_id


@pytest.mark.django_db
def test_a_worse_group_is_a_fail_and_an_undecided_group_is_acknowledged(paired_request: ReviewRequest) -> None:
    findings = [status.finding for status in selectors.review_request_findings(request=paired_request)]
    by_group = {finding.group: finding for finding in findings}
    assert set(by_group) == {"m", "x"}
    worse, small = by_group["m"], by_group["x"]
    assert worse.verdict == FAIL
    assert worse.reference == "champion model_a"
    assert worse.difference is not None
    assert worse.difference < 0 or worse.metric in ("fpr", "fnr")
    assert "challenger model_b is worse than champion model_a" in (worse.note or "")
    assert small.verdict == INCONCLUSIVE
    assert small.positives_needed is not None
    assert small.positives_needed > 0


@pytest.mark.django_db
def test_votes_approve_the_challenger_once_the_worse_group_is_waived_and_the_gate_says_so(
    paired_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    request = in_review(paired_request, carol)
    with pytest.raises(services.ApprovalError):
        vote(request, dave)  # a FAIL without a waiver: no approving vote
    waive_all(request, carol, [dave, frank])
    assert len(keys(request, FAIL)) == 1
    vote(request, dave)
    vote(request, frank)
    request.refresh_from_db()
    assert request.state == RequestState.APPROVED
    answer = selectors.gate_answer(model_identifier="model_b")
    assert answer is not None
    assert answer.approved
    assert answer.document_sha256 == hashes(request)
    assert selectors.gate_answer(model_identifier="model_a") is None
    context = review_request_context(request=request)
    assert context.subject.kind == "paired_comparison"
    assert ("The committee voted on", "Challenger model_b replaces champion model_a") in context.subject.details
    assert context.documents[0].label.endswith("challenger model_b against champion model_a")
    assert len(context.waivers) == 1
    assert len(context.acknowledgements) == 1


@pytest.mark.django_db
def test_the_request_page_offers_and_shows_the_claim(bob: User, carol: User, tmp_path: Path) -> None:
    comparison, document = paired_document(bob, tmp_path)
    client = Client()
    client.force_login(bob)
    page = client.get(f"/comparisons/{comparison.pk}/").content.decode()
    assert f'href="/approvals/new/?document={document.pk}"' in page
    form = client.get(f"/approvals/new/?comparison={comparison.pk}")
    assert form.status_code == 200
    html = form.content.decode()
    assert 'id="claim"' in html
    assert 'value="model_b"' in html
    made = client.post(
        f"/approvals/new/?comparison={comparison.pk}",
        {"title": "B for A", "intended_use": "loan pre-screening", "model_identifier": "", "documents": [document.pk]},
    )
    assert made.status_code == 302, made.content.decode()[:3000]
    request = ReviewRequest.objects.get()
    assert request.model_identifier == "model_b"
    shown = client.get(f"/approvals/{request.pk}/").content.decode()
    assert "Challenger <code>model_b</code> replaces champion <code>model_a</code>" in shown
