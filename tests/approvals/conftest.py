from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role, User
from auditportal.approvals import selectors, services, tasks
from auditportal.approvals.models import RequestState, ReviewRequest, VoteChoice
from auditportal.celery import app
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.models import VerdictDocument
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.experiments import services as experiment_services
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Trial
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE
from auditportal.fairness.files.intersections import join_key
from auditportal.fairness.files.metricsfile import MetricRecord
from auditportal.outbox.models import OutboxMessage
from tests.evidence.helpers import FAIR, UNFAIR, counts
from tests.experiments.conftest import demo_version, fake_trainer
from tests.factories import PASSWORD, PredictionAuditFactory, TrialFactory, make_user

__all__ = ["demo_version", "fake_trainer"]

# The approvals' tasks, registered as a worker has them (worker_runs runs them by name).
TASKS = (tasks.request_submitted_mail_task, tasks.request_decided_mail_task, tasks.review_request_tag_checkpoint_task)

# Few positives per group: every comparison's interval straddles the tolerance.
SMALL = {"female": (30, 20, 10, 40), "male": (35, 15, 10, 40)}


@pytest.fixture
def frank(db: None) -> User:
    """Ethics-committee member."""
    return make_user("frank", [Role.ETHICS_COMMITTEE])


@pytest.fixture
def gina(db: None) -> User:
    """Ethics-committee member."""
    return make_user("gina", [Role.ETHICS_COMMITTEE])


@pytest.fixture
def ed(db: None) -> User:
    """An ML engineer who had no part in the subject."""
    return make_user("ed", [Role.ML_ENGINEER])


@pytest.fixture
def runs(settings: SettingsWrapper, tmp_path: Path) -> Path:
    settings.EXPERIMENT_RUN_DIR = tmp_path / "runs"
    return tmp_path / "runs"


def trial_document(
    version: DatasetVersion, engineer: User, groups: dict[str, tuple[int, int, int, int]], runs: Path
) -> VerdictDocument:
    """A completed trial's validation, frozen, with a checkpoint folder under ``runs``."""
    trial: Trial = TrialFactory.create(experiment__dataset_version=version, experiment__launched_by=engineer)
    trial_metrics_ingest(trial=trial, records=[MetricRecord(kind="validation", step=4, metrics=counts(groups))])
    checkpoint = runs / f"exp-{trial.experiment_id}" / "trial-1" / "xdg" / "determined" / f"ckpt-{trial.pk}"
    checkpoint.mkdir(parents=True)
    trial.checkpoint = str(checkpoint)
    trial.save(update_fields=["checkpoint"])
    return experiment_services.verdict_document_freeze_trial(user=engineer, trial=trial, step=4)


@pytest.fixture
def fair_trial_request(demo_version: DatasetVersion, bob: User, runs: Path) -> ReviewRequest:
    """bob's draft for a trial whose document is PASS throughout."""
    document = trial_document(demo_version, bob, FAIR, runs)
    return services.review_request_create(
        user=bob, title="Credit model v3", intended_use="Pre-screening of loan applications", documents=[document]
    )


@pytest.fixture
def unfair_trial_request(demo_version: DatasetVersion, bob: User, runs: Path) -> ReviewRequest:
    document = trial_document(demo_version, bob, UNFAIR, runs)
    return services.review_request_create(
        user=bob, title="Credit model v4", intended_use="Pre-screening", documents=[document]
    )


@pytest.fixture
def small_trial_request(demo_version: DatasetVersion, bob: User, runs: Path) -> ReviewRequest:
    document = trial_document(demo_version, bob, SMALL, runs)
    return services.review_request_create(user=bob, title="Pilot", intended_use="Pilot study", documents=[document])


# Two groups far below the reference's recall (each FAILs on tpr), one too small to tell (INCONCLUSIVE).
FAMILY = {
    "female": (1200, 800, 300, 2700),
    "nonbinary": (1100, 900, 300, 2700),
    "other": (44, 6, 10, 40),
    "male": (2700, 300, 300, 2700),
}


def demo_trial_counts(rows: int = 3000) -> dict[str, float | None]:
    """A validation like demo trial 3's (issue 27): gender, age group and their intersection, the
    "thin file" gap (women's recall 0.63 against 0.85, a lower false-positive rate), 3,000 rows. Judged
    under every metric: 80 comparisons, 29 FAIL and 51 INCONCLUSIVE; under the default (tpr): 6 FAIL,
    10 INCONCLUSIVE."""
    genders = {"female": 0.50, "male": 0.47, "nonbinary": 0.03}
    ages = {"18-29": 0.22, "30-44": 0.31, "45-64": 0.33, "65+": 0.14}
    rates = {"female": (0.63, 0.03), "male": (0.85, 0.25), "nonbinary": (0.85, 0.25)}
    cells: dict[tuple[str, str], tuple[int, int, int, int]] = {}
    for gender, gender_share in genders.items():
        for age, age_share in ages.items():
            size = rows * gender_share * age_share
            positives = round(size * 0.55)
            negatives = round(size) - positives
            tpr, fpr = rates[gender]
            tp, fp = round(positives * tpr), round(negatives * fpr)
            cells[(gender, age)] = (tp, positives - tp, fp, negatives - fp)
    metrics: dict[str, float | None] = {"accuracy": 0.8}

    def put(attribute: str, group: str, confusion: Sequence[int]) -> None:
        for cell, value in zip(("tp", "fn", "fp", "tn"), confusion, strict=True):
            metrics[f"count/{attribute}/{group}/{cell}"] = float(value)

    for gender in genders:
        put("gender", gender, [sum(cells[(gender, age)][i] for age in ages) for i in range(4)])
    for age in ages:
        put("age_group", age, [sum(cells[(gender, age)][i] for gender in genders) for i in range(4)])
    for (gender, age), confusion in cells.items():
        put(join_key(["gender", "age_group"]), join_key([gender, age]), confusion)
    return metrics


def demo_trial_document(version: DatasetVersion, engineer: User, runs: Path) -> VerdictDocument:
    """A completed trial with demo_trial_counts() at step 4, frozen under the active policy."""
    trial: Trial = TrialFactory.create(experiment__dataset_version=version, experiment__launched_by=engineer)
    trial_metrics_ingest(trial=trial, records=[MetricRecord(kind="validation", step=4, metrics=demo_trial_counts())])
    checkpoint = runs / f"exp-{trial.experiment_id}" / "trial-3" / "checkpoint"
    checkpoint.mkdir(parents=True)
    trial.checkpoint = str(checkpoint)
    trial.save(update_fields=["checkpoint"])
    return experiment_services.verdict_document_freeze_trial(user=engineer, trial=trial, step=4)


@pytest.fixture
def family_request(demo_version: DatasetVersion, bob: User, runs: Path, carol: User) -> ReviewRequest:
    """bob's trial request in review: two FAIL comparisons of one family (gender: tpr), one INCONCLUSIVE."""
    document = trial_document(demo_version, bob, FAMILY, runs)
    made = services.review_request_create(
        user=bob, title="Credit model v5", intended_use="Pre-screening", documents=[document]
    )
    return in_review(made, carol)


@pytest.fixture
def audit_request(bob: User, dataset_storage: Path) -> ReviewRequest:
    """bob's draft for his prediction audit of a 12-row file (its comparisons are INCONCLUSIVE)."""
    audit = PredictionAuditFactory.create(created_by=bob)
    return services.review_request_create(
        user=bob,
        title="Vendor scoring model",
        intended_use="Ranking applications for manual review",
        documents=[verdict_document_of_audit(audit=audit)],
        model_identifier="vendor-score:2.1",
    )


def hashes(request: ReviewRequest) -> list[str]:
    return sorted(request.documents.values_list("sha256", flat=True))


def keys(request: ReviewRequest, verdict: str) -> list[str]:
    return [s.finding.key for s in selectors.review_request_findings(request=request) if s.finding.verdict == verdict]


def in_review(request: ReviewRequest, reviewer: User) -> ReviewRequest:
    services.review_request_submit(user=request.requested_by, request=request)
    services.review_request_start_review(user=reviewer, request=request)
    request.refresh_from_db()
    return request


def vote(
    request: ReviewRequest, member: User, choice: str = VoteChoice.APPROVE, reason: str = "fit for the stated use"
) -> ReviewRequest:
    services.review_vote_cast(
        user=member,
        request=request,
        choice=choice,
        reason=reason,
        password=PASSWORD,
        document_sha256=hashes(request),
        acknowledged=keys(request, INCONCLUSIVE),
    )
    request.refresh_from_db()
    return request


def waive_all(request: ReviewRequest, proposer: User, members: list[User], *, days: int = 30) -> None:
    for key in keys(request, FAIL):
        waiver = services.waiver_propose(
            user=proposer,
            request=request,
            finding_key=key,
            reason="the gap is explained by the vendor's data",
            compensating_measures="manual review of every rejection",
            expires_on=date.today() + timedelta(days=days),
        )
        for member in members:
            services.waiver_vote_cast(
                user=member,
                waiver=waiver,
                choice=VoteChoice.APPROVE,
                reason="acceptable with manual review",
                password=PASSWORD,
                document_sha256=hashes(request),
            )


def approved(request: ReviewRequest, reviewer: User, members: list[User]) -> ReviewRequest:
    in_review(request, reviewer)
    waive_all(request, members[0], members)
    for member in members:
        vote(request, member)
    assert request.state == RequestState.APPROVED, request.state
    return request


def handed_over(name: str) -> list[list[Any]]:
    """The arguments of each task named ``name`` that the outbox handed to the broker (its transaction
    committed), oldest first."""
    return [message.args for message in OutboxMessage.objects.filter(name=name, sent_at__isnull=False).order_by("pk")]


def worker_runs(name: str) -> list[Any]:
    """What a worker does with the tasks named ``name`` that the outbox handed to the broker: runs each
    here, oldest first, and once (its row goes); their results."""
    results = []
    for message in OutboxMessage.objects.filter(name=name, sent_at__isnull=False).order_by("pk"):
        results.append(app.tasks[name].apply(args=message.args, kwargs=message.kwargs).get())
        message.delete()
    return results


def days_from_now(days: int) -> date:
    return (timezone.now() + timedelta(days=days)).date()
