"""Report contexts from the portal's records: the pieces a decision's report is made of.

The approvals app fills the decision, the votes, waivers and acknowledgements from its own records
and calls these for the rest; ``prediction_audit_context`` puts them together for a prediction audit.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from auditportal.accounts.models import Role, User
from auditportal.activity.selectors import chain_head
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.models import DocumentKind, VerdictDocument
from auditportal.fairness.report_context import (
    Acknowledgement,
    AttributeGroups,
    ChainHead,
    DatasetProvenance,
    Decision,
    EvidenceDocument,
    Figure,
    Person,
    PolicyProvenance,
    ReportContext,
    Subject,
    Vote,
    Waiver,
)
from auditportal.policies.models import FairnessPolicy


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
    else:
        trial = document.trial
        assert trial is not None
        label = f"Experiment {trial.experiment_id}, trial {trial.number}, validation at step {document.step}"
    return EvidenceDocument(label=label, sha256=document.sha256, canonical=document.canonical)


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
                ("Predictions file", f"{audit.original_name} ({audit.num_rows} rows)"),
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
