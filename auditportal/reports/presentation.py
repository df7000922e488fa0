"""A verification result as the API returns it (JSON) and as the command prints it (lines); the verify
page renders the JSON. One wording for all three. The name a report's PDF downloads under, and a
report as the API answers it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.urls import reverse

from auditportal.lib.downloads import name_part
from auditportal.reports.models import Report, ReportRevision
from auditportal.reports.selectors import ReportVerification, report_state
from auditportal.reports.verification import SignatureCheck


def report_as_json(report: Report, *, detail: bool = False) -> dict[str, Any]:
    """``report`` as the API answers it (its revisions prefetched: selectors.report_list); ``detail`` adds
    who must sign and who has, and every revision with its SHA-256."""
    revisions = sorted(report.revisions.all(), key=lambda revision: revision.number)
    latest = revisions[-1]
    request = report.review_request
    pdf_url = reverse("api-report-pdf", args=[report.pk])
    body: dict[str, Any] = {
        "id": report.pk,
        "title": report.title,
        "subject": report.subject_label,
        "model": (request.model_identifier or None) if request is not None else None,
        "review_request": report.review_request_id,
        "decision": report.request_outcome or None,
        "deployment": report.deployment.name if report.deployment is not None else None,
        "period": _period(report),
        "state": report_state(report=report),
        "created_at": report.created_at.isoformat(),
        "latest_revision": latest.number,
        "sha256": latest.sha256,
        "url": reverse("api-report", args=[report.pk]),
        "pdf_url": pdf_url,
        "page_url": reverse("reports:detail", args=[report.pk]),
    }
    if not detail:
        return body
    signed = {revision.signer.get_username(): revision for revision in revisions if revision.signer is not None}
    body["pages"] = report.pages
    body["signatories"] = [
        _signatory(person, signed.get(str(person.get("key")))) for person in report.context.get("signatories") or []
    ]
    body["revisions"] = [
        {
            "number": revision.number,
            "kind": revision.kind,
            "signer": revision.signer.get_username() if revision.signer is not None else None,
            "sha256": revision.sha256,
            "size_bytes": revision.size_bytes,
            "created_at": revision.created_at.isoformat(),
            "pdf_url": f"{pdf_url}?revision={revision.number}",
        }
        for revision in revisions
    ]
    return body


def _period(report: Report) -> dict[str, str] | None:
    """A monitoring report's period ``[from, to)``, UTC."""
    if report.period_start is None or report.period_end is None:
        return None
    return {
        "from": report.period_start.astimezone(dt.UTC).isoformat(),
        "to": report.period_end.astimezone(dt.UTC).isoformat(),
    }


def _signatory(person: dict[str, Any], revision: ReportRevision | None) -> dict[str, Any]:
    return {
        "username": str(person.get("key") or ""),
        "name": str(person.get("name") or ""),
        "role": str(person.get("role") or ""),
        "signed": revision is not None,
        "signed_at": revision.created_at.isoformat() if revision is not None else None,
        "revision": revision.number if revision is not None else None,
    }


def revision_file_names(report: Report, number: int) -> tuple[str, str]:
    """The download name of ``report``'s revision ``number``, and its ASCII fallback (``lib.downloads``):
    ``review-request-12-credit-model-v5-approved-r2.pdf`` from the request's number, the report's title
    (the request's), the decision and the revision; ``report-7-r1.pdf`` for a report without a request.
    The title part is left out when nothing of it is fit for a file name."""

    def name(ascii_only: bool) -> str:
        if report.deployment is not None and report.period_start is not None and report.period_end is not None:
            parts = [
                f"monitoring-report-{report.pk}",
                name_part(report.deployment.name.replace("/", "-"), ascii_only=ascii_only),
                f"{report.period_start.astimezone(dt.UTC):%Y%m%dT%H%M}-{report.period_end.astimezone(dt.UTC):%Y%m%dT%H%M}",
            ]
        elif report.review_request_id is None:
            parts = [f"report-{report.pk}"]
        else:
            parts = [f"review-request-{report.review_request_id}", name_part(report.title, ascii_only=ascii_only)]
            parts.append(report.request_outcome)
        return "-".join(part for part in parts if part) + f"-r{number}.pdf"

    return name(ascii_only=False), name(ascii_only=True)


def verification_json(result: ReportVerification, *, file_name: str) -> dict[str, Any]:
    match = result.match
    return {
        "ok": result.ok,
        "file": {"name": file_name, "sha256": result.pdf.sha256, "size": result.pdf.size},
        "error": result.pdf.error,
        "signatures": [_signature(check) for check in result.pdf.signatures],
        "report": None
        if match is None
        else {
            "id": match.report_id,
            "title": match.title,
            "subject": match.subject,
            "revision": match.revision,
            "latest_revision": match.latest_revision,
            "exact": match.exact,
            "review_request": match.review_request_id,
            "decision": match.request_outcome or None,
        },
        "problems": result.problems,
    }


def _signature(check: SignatureCheck) -> dict[str, Any]:
    return {
        "field": check.field,
        "signer": check.signer,
        "role": check.role,
        "organisation": check.organisation,
        "signed_at": _time(check.signed_at),
        "certification": check.certification,
        "intact": check.intact,
        "valid": check.valid,
        "trusted": check.trusted,
        "modified_after": check.modified_after,
        "modification": check.modification,
        "modification_allowed": check.modification_allowed,
        "signed_sha256": check.signed_sha256,
        "certificate_sha256": check.certificate_fingerprint,
        "ok": check.ok,
        "problems": list(check.problems),
    }


def _time(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def yes_no(value: bool) -> str:
    return "yes" if value else "NO"


def _trusted(value: bool | None) -> str:
    return "not judged (the signed bytes were changed or cannot be read)" if value is None else yes_no(value)


def verification_lines(value: dict[str, Any]) -> list[str]:
    """``verification_json``'s value as text for a terminal."""
    file = value["file"]
    lines = [f"File: {file['name']} ({file['size']:,} bytes, SHA-256 {file['sha256']})"]
    if value["error"]:
        lines.append(f"Not verified: {value['error']}")
    signatures = value["signatures"]
    for number, item in enumerate(signatures, start=1):
        kind = "certification" if item["certification"] else "approval"
        lines += [
            f"Signature {number} of {len(signatures)}: field {item['field']} ({kind})",
            f"  signer:   {item['signer']} ({item['role'] or 'no role'}, {item['organisation'] or 'no organisation'})",
            f"  time:     {item['signed_at'] or 'not given'} (as the signer's clock said)",
            f"  valid:    {yes_no(item['intact'] and item['valid'])}",
            f"  trusted:  {_trusted(item['trusted'])}",
            "  modified after it: "
            + (
                "no"
                if not item["modified_after"]
                else f"yes: {item['modification']} ({'allowed' if item['modification_allowed'] else 'NOT allowed'})"
            ),
        ]
    report = value["report"]
    if report is None:
        lines.append("Portal: no stored report has this file's SHA-256")
    else:
        how = "is" if report["exact"] else "starts with"
        lines.append(
            f"Portal: the file {how} revision {report['revision']} of {report['latest_revision']} of report "
            f"#{report['id']} ({report['title']}; {report['subject']})"
        )
        if report["review_request"] is not None:
            lines.append(f"Review request: #{report['review_request']} ({report['decision']})")
    if value["ok"]:
        lines.append("Result: OK")
    else:
        lines.append(f"Result: FAILED ({len(value['problems'])} problem{'s' if len(value['problems']) != 1 else ''})")
        lines += [f"  - {problem}" for problem in value["problems"]]
    return lines
