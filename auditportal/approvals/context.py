"""Report contexts from the portal's records: what a decision fills for its signed report.

``review_request_context`` reads a review request's decision, votes, waivers and acknowledgements and
the provenance of what was judged (documents, policy, dataset, experiment, the activity log's head);
the pieces it is made of are public for tests and benchmarks (``prediction_audit_context`` puts them
together for a prediction audit). It lives with the decision, below the reports app: the reports app
renders and signs a context as plain data (fairness/documents/report_context.py) and imports nothing from here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
from django.conf import settings

from auditportal.accounts.models import Role, User
from auditportal.activity.selectors import chain_head
from auditportal.approvals.models import RequestState, ReviewRequest, VoteChoice, WaiverState
from auditportal.approvals.rules import current_votes
from auditportal.attributions.models import TrialAttribution
from auditportal.attributions.selectors import attribution_for_report
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.models import DocumentKind, VerdictDocument
from auditportal.experiments.models import Trial
from auditportal.experiments.selectors import ExperimentOverview, experiment_overview
from auditportal.fairness.documents.report_context import (
    Acknowledgement,
    AttributeGroups,
    AttributionEvidence,
    ChainHead,
    DatasetProvenance,
    Decision,
    EvidenceDocument,
    ExperimentProvenance,
    ExperimentTrials,
    Figure,
    Person,
    PolicyProvenance,
    ReportContext,
    Subject,
    TrialOverview,
    Vote,
    Waiver,
    checkpoint_label,
)
from auditportal.fairness.documents.verdict_documents import config_digest
from auditportal.fairness.figures.downsample import MIN_POINTS, downsample_indices
from auditportal.fairness.figures.experiment import timeline_point_budget
from auditportal.fairness.text import numbers
from auditportal.policies.models import FairnessPolicy

# The report's EOD timeline keeps at most this many points over all its trials (each trial at least
# 100): a static figure a page wide shows no more, and the context (stored, hashed) stays small.
REPORT_TIMELINE_POINTS = 2000


def person(user: User, role: Role) -> Person:
    return Person(key=user.get_username(), name=user.get_full_name() or user.get_username(), role=role.label)


def dataset_provenance(version: DatasetVersion) -> DatasetProvenance:
    attributes: dict[str, list[tuple[str, int]]] = {}
    unknown: dict[str, int] = {}
    for summary in version.group_summaries.filter(is_intersection=False).order_by("attribute", "group"):
        if summary.is_unknown:
            unknown[summary.attribute] = int(summary.rows)
        else:
            attributes.setdefault(summary.attribute, []).append((summary.group, int(summary.rows)))
    return DatasetProvenance(
        name=version.dataset.name,
        version=version.number,
        sha256=version.sha256,
        rows=int(version.num_rows),
        attributes=tuple(
            AttributeGroups(attribute=name, groups=tuple(groups), unknown=unknown.get(name, 0))
            for name, groups in attributes.items()
        ),
    )


def policy_provenance(policy: FairnessPolicy) -> PolicyProvenance:
    return PolicyProvenance(
        version=policy.version,
        tolerance=policy.tolerance,
        alpha=policy.alpha,
        metrics=tuple(policy.metrics),
        reference_rule=policy.reference_rule,
        min_group_size=policy.min_group_size,
    )


def evidence_document(document: VerdictDocument) -> EvidenceDocument:
    if document.kind == DocumentKind.PREDICTION_AUDIT:
        audit = document.prediction_audit
        assert audit is not None
        label = f"Prediction audit #{audit.pk} of {audit.original_name}"
    elif document.kind == DocumentKind.PAIRED_COMPARISON:
        comparison = document.paired_comparison
        assert comparison is not None
        label = (
            f"Paired comparison #{comparison.pk} of {comparison.original_name}: challenger "
            f"{comparison.challenger} against champion {comparison.champion}"
        )
    else:
        trial = document.trial
        assert trial is not None
        label = f"Experiment {trial.experiment_id}, trial {trial.number}, validation at step {document.step}"
    return EvidenceDocument(label=label, sha256=document.sha256, canonical=document.canonical)


def attribution_evidence(attribution: TrialAttribution) -> AttributionEvidence:
    """A trial's done attributions as a report shows them (its stored canonical JSON, hashed)."""
    trial = attribution.trial
    return AttributionEvidence(
        label=(
            f"Attributions #{attribution.pk} of experiment {trial.experiment_id}, trial {trial.number} "
            f"({checkpoint_label(attribution.checkpoint)}): at most {numbers.count(attribution.sample_size)} "
            f"validation rows, seed {attribution.seed}"
        ),
        sha256=attribution.sha256,
        canonical=attribution.canonical,
    )


def current_chain_head() -> ChainHead | None:
    head = chain_head()
    return None if head is None else ChainHead(seq=head[0], hash=head[1])


def prediction_audit_context(
    *,
    audit: PredictionAudit,
    document: VerdictDocument,
    model: str,
    dataset_version: DatasetVersion | None = None,
    decision: Decision | None = None,
    votes: Sequence[Vote] = (),
    signatories: Sequence[Person] = (),
    waivers: Sequence[Waiver] = (),
    acknowledgements: Sequence[Acknowledgement] = (),
    figures: Sequence[Figure] = (),
    title: str | None = None,
) -> ReportContext:
    """The report of a decision on a prediction audit, judged in ``document`` (one of the audit's)."""
    if document.prediction_audit_id != audit.pk:
        raise ValueError(f"{document} is not a document of {audit}")
    return ReportContext(
        title=title or f"Fairness audit report: {model}",
        organisation=settings.REPORT_ORGANISATION,
        subject=Subject(
            kind="prediction_audit",
            label=f"Prediction audit #{audit.pk} of {audit.original_name}",
            model=model,
            details=(
                ("Predictions file", f"{audit.original_name} ({numbers.plural(audit.num_rows, 'row')})"),
                ("File SHA-256", audit.sha256),
                ("Audited", f"{audit.created_at:%Y-%m-%d %H:%M} UTC by {audit.created_by.get_username()}"),
            ),
        ),
        policy=policy_provenance(document.policy),
        documents=(evidence_document(document),),
        decision=decision,
        votes=tuple(votes),
        signatories=tuple(signatories),
        dataset=dataset_provenance(dataset_version) if dataset_version is not None else None,
        chain_head=current_chain_head(),
        waivers=tuple(waivers),
        acknowledgements=tuple(acknowledgements),
        figures=tuple(figures),
    )


def experiment_provenance(trial: Trial) -> ExperimentProvenance:
    """The trial's experiment: the SHA-256 of its config as submitted (YAML text, UTF-8) and the trial's
    hyperparameters (values as JSON)."""
    experiment = trial.experiment
    return ExperimentProvenance(
        label=f"Experiment {experiment.pk} ({experiment.name}), trial {trial.number}",
        config_sha256=config_digest(experiment.config_yaml),
        hparams=tuple((str(name), json.dumps(value, sort_keys=True)) for name, value in sorted(trial.hparams.items())),
    )


def experiment_trials(overview: ExperimentOverview, *, reviewed_trial_id: int, label: str) -> ExperimentTrials:
    """The trials of ``overview`` for a trial report, the one with ``reviewed_trial_id`` marked, each
    trial's eod series downsampled (the dashboard's rule: first and last points, extremes and verdict
    changes kept) to REPORT_TIMELINE_POINTS in all."""
    budget = max(MIN_POINTS, timeline_point_budget(len(overview.timelines), total=REPORT_TIMELINE_POINTS))
    rows = []
    for timeline, summary in zip(overview.timelines, overview.summaries, strict=True):
        values = np.asarray(timeline.eod, dtype=np.float64)
        labels = list(timeline.verdicts) if timeline.verdicts is not None else [None] * len(values)
        kept = downsample_indices(values, max_points=budget, labels=labels).tolist()
        steps = np.asarray(timeline.steps, dtype=np.int64)
        rows.append(
            TrialOverview(
                number=timeline.number,
                reviewed=timeline.trial_id == reviewed_trial_id,
                latest_step=int(steps[-1]) if len(steps) else None,
                accuracy=summary.accuracy,
                eod=summary.eod,
                lowest_eod=summary.lowest_eod,
                lowest_eod_step=summary.lowest_eod_step,
                noise_floor=summary.noise_floor,
                verdict=summary.verdict,
                hparams=tuple(summary.hparams),
                steps=tuple(int(steps[index]) for index in kept),
                eod_series=tuple(_finite(float(values[index])) for index in kept),
                verdicts=tuple(labels[index] for index in kept),
            )
        )
    return ExperimentTrials(
        label=label,
        tolerance=overview.tolerance,
        noise_floor=overview.noise_floor,
        trials=tuple(rows),
    )


def _finite(value: float) -> float | None:
    # JSON has no NaN: an undefined eod is null, a gap in the line.
    return None if math.isnan(value) else round(value, 6)


def review_request_context(*, request: ReviewRequest, revoked_by: User | None = None) -> ReportContext:
    """The report of ``request``'s decision (approved, rejected or revoked), read from its records
    inside the deciding transaction: the chain head is the activity log's head with the decision's
    event in it. Figures are left to the worker (``reports.figures.context_with_figures``).

    Signatories: for an approval or a rejection, the committee members whose current vote in the
    deciding round is that decision; for a revocation, ``revoked_by`` when they are a committee
    member (none when an administrator outside the committee revoked).
    """
    outcome = {
        RequestState.APPROVED: "approved",
        RequestState.REJECTED: "rejected",
        RequestState.REVOKED: "revoked",
    }.get(RequestState(request.state))
    if outcome is None:
        raise ValueError(f"review request #{request.pk} is {request.state}: only a decision has a report")
    documents = list(request.documents.order_by("id"))
    votes = [
        vote for vote in current_votes(list(request.votes.filter(round=request.round).select_related("voter"))).values()
    ]
    votes.sort(key=lambda vote: (vote.cast_at, vote.pk))
    members = {vote.voter_id: person(vote.voter, Role.ETHICS_COMMITTEE) for vote in votes}
    if outcome == "revoked":
        at = request.revoked_at
        note = f"Approval revoked: {request.revoked_reason}"
        signatories = (
            [person(revoked_by, Role.ETHICS_COMMITTEE)]
            if revoked_by is not None and revoked_by.has_role(Role.ETHICS_COMMITTEE)
            else []
        )
    else:
        at = request.decided_at
        note = ""
        deciding = VoteChoice.APPROVE if outcome == "approved" else VoteChoice.REJECT
        signatories = [members[vote.voter_id] for vote in votes if vote.choice == deciding]
    assert at is not None
    approving = [vote for vote in votes if vote.choice == VoteChoice.APPROVE]
    acknowledged: dict[str, tuple[str, str, list[str]]] = {}
    for vote in approving:
        for item in vote.acknowledgements.order_by("id"):
            label = f"{item.attribute}: {item.metric} of {item.group} (document {item.document.sha256[:12]})"
            needed = str(item.positives_needed) if item.positives_needed is not None else item.needed_reason
            acknowledged.setdefault(item.finding_key, (label, needed, []))[2].append(members[vote.voter_id].name)
    # One entry per waived comparison (a waiver may cover a set): the report's count of failing items
    # accepted by a waiver is the count of comparisons, each named with its document and its waiver.
    waivers = [
        Waiver(
            scope=f"{comparison.label} (document {comparison.document.sha256[:12]}; waiver #{waiver.pk})",
            reason=waiver.reason
            + (f" Compensating measures: {waiver.compensating_measures}" if waiver.compensating_measures else ""),
            expires=waiver.expires_at.date().isoformat(),
            approved_by=approved_by,
        )
        for waiver in request.waivers.filter(round=request.round, state=WaiverState.APPROVED).order_by(
            "expires_at", "id"
        )
        for approved_by in [
            tuple(
                sorted(
                    vote.voter.get_full_name() or vote.voter.get_username()
                    for vote in current_votes(list(waiver.votes.select_related("voter"))).values()
                    if vote.choice == VoteChoice.APPROVE
                )
            )
        ]
        for comparison in waiver.scope()
    ]
    details: list[tuple[str, str]] = [("Review request", f"#{request.pk} {request.title}")]
    details.append(("Intended use", request.intended_use))
    experiment = None
    dataset = None
    trials = None
    attributions: tuple[AttributionEvidence, ...] = ()
    if request.trial_id is not None:
        trial = request.trial
        assert trial is not None
        kind, label = "trial", f"Experiment {trial.experiment_id}, trial {trial.number}"
        # A local checkpoint is a folder on the server: printed by its name, never its path.
        checkpoint = checkpoint_label(request.checkpoint) if request.checkpoint else "(none recorded)"
        details.append(("Checkpoint", checkpoint))
        experiment = experiment_provenance(trial)
        dataset = dataset_provenance(trial.experiment.dataset_version)
        trials = experiment_trials(
            experiment_overview(experiment=trial.experiment),
            reviewed_trial_id=trial.pk,
            label=f"experiment {trial.experiment_id} ({trial.experiment.name})",
        )
        # Why the reviewed checkpoint has its gaps, when its attributions were computed (docs/attributions.md).
        attribution = attribution_for_report(trial=trial, checkpoint=request.checkpoint) if request.checkpoint else None
        if attribution is not None:
            attributions = (attribution_evidence(attribution),)
    elif request.paired_comparison_id is not None:
        comparison = request.paired_comparison
        assert comparison is not None
        kind, label = "paired_comparison", f"Paired comparison #{comparison.pk} of {comparison.original_name}"
        details += [
            ("The committee voted on", f"Challenger {comparison.challenger} replaces champion {comparison.champion}"),
            ("Predictions file", f"{comparison.original_name} ({numbers.plural(comparison.num_rows, 'row')})"),
            ("File SHA-256", comparison.sha256),
        ]
    else:
        audit = request.prediction_audit
        assert audit is not None
        kind, label = "prediction_audit", f"Prediction audit #{audit.pk} of {audit.original_name}"
        details += [
            ("Predictions file", f"{audit.original_name} ({numbers.plural(audit.num_rows, 'row')})"),
            ("File SHA-256", audit.sha256),
        ]
    return ReportContext(
        # Titled by the request, not by the model identifier (for a trial, its checkpoint's UUID).
        title=request.title,
        organisation=settings.REPORT_ORGANISATION,
        subject=Subject(kind=kind, label=label, model=request.model_identifier, details=tuple(details)),
        policy=policy_provenance(request.policy),
        documents=tuple(evidence_document(document) for document in documents),
        decision=Decision(
            outcome=outcome,
            at=at.isoformat(),
            requester=person(request.requested_by, Role.ML_ENGINEER),
            request_label=f"Review request #{request.pk}",
            note=note,
        ),
        votes=tuple(
            Vote(member=members[vote.voter_id], vote=str(vote.choice), reason=vote.reason, at=vote.cast_at.isoformat())
            for vote in votes
        ),
        signatories=tuple(signatories),
        dataset=dataset,
        experiment=experiment,
        trials=trials,
        attributions=attributions,
        chain_head=current_chain_head(),
        waivers=tuple(waivers),
        acknowledgements=tuple(
            Acknowledgement(item=label, positives_needed=needed, by=tuple(by))
            for label, needed, by in acknowledged.values()
        ),
    )
