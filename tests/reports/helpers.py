"""Helpers of the report tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from auditportal.accounts.models import Role, User
from auditportal.approvals import context as decision_context
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.fairness.documents.report_context import Decision, Person, ReportContext, Vote
from auditportal.reports.models import CertificateAuthority, Report, ReportRevision
from tests.browser.conftest import require_system_tool

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "reports"


def decided_context(
    audit: PredictionAudit, dataset_version: DatasetVersion | None, signatories: list[User], **extra: object
) -> ReportContext:
    """A report context as the approvals wiring will fill it, with a made-up decision and votes."""
    people = [decision_context.person(user, Role.ETHICS_COMMITTEE) for user in signatories]
    requester = Person(key="bob", name="Bob Engineer", role=Role.ML_ENGINEER.label)
    return decision_context.prediction_audit_context(
        audit=audit,
        document=verdict_document_of_audit(audit=audit),
        model="credit-scorer v3.2",
        dataset_version=dataset_version,
        decision=Decision(
            outcome="approved", at="2026-11-30T14:05:00Z", requester=requester, request_label="Review request #12"
        ),
        votes=tuple(
            Vote(member=person, vote="approve", reason=f"Checked by {person.name}.", at=f"2026-11-30T13:5{index}:00Z")
            for index, person in enumerate(people)
        ),
        signatories=people,
        **extra,  # type: ignore[arg-type]
    )


def pdf_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        package = "libnss3-tools" if name == "certutil" else "qpdf" if name == "qpdf" else "poppler-utils"
        require_system_tool(f"{name} is not installed (apt-get install {package})")
    assert path is not None
    return path


@dataclass(frozen=True)
class SignedReport:
    report: Report
    revisions: list[ReportRevision]

    @property
    def newest(self) -> ReportRevision:
        return self.revisions[-1]

    @property
    def data(self) -> bytes:
        return self.newest.path.read_bytes()


def nss_database(directory: Path) -> str:
    """An NSS database that trusts every portal authority for signatures, for poppler's pdfsig."""
    certutil = pdf_tool("certutil")
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run([certutil, "-N", "-d", f"sql:{directory}", "--empty-password"], check=True, capture_output=True)
    for authority in CertificateAuthority.objects.all():
        pem = directory / f"ca-{authority.pk}.pem"
        pem.write_text(authority.certificate_pem, encoding="utf-8")
        subprocess.run(
            [certutil, "-A", "-d", f"sql:{directory}", "-n", f"portal-{authority.pk}", "-t", ",C,", "-i", str(pem)],
            check=True,
            capture_output=True,
        )
    return f"sql:{directory}"
