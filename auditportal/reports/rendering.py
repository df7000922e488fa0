"""The one module that talks to WeasyPrint: a ReportContext to a PDF/A-3b file (docs/reports.md).

The report template (templates/reports/report.html) is rendered with Django's template engine, laid
out by WeasyPrint with the fonts and stylesheet in static/ (no other file, and nothing from a network,
can be fetched while rendering), and written as PDF/A-3b with each verdict document (its canonical
JSON, byte for byte) and its group table (CSV) embedded as associated files. The positions of the
signature boxes the template draws come back with the PDF, for the signing module to create the
signature fields on them.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.template.loader import render_to_string

from auditportal.fairness.documents.monitoring_report import MonitoringReportContext, batch_counts_csv
from auditportal.fairness.documents.report_context import EvidenceDocument, Figure, ReportContext, group_table_csv
from auditportal.reports.signing import FieldBox

if TYPE_CHECKING:
    from weasyprint.urls import URLFetcher

PDF_VARIANT = "pdf/a-3b"
TEMPLATE = "reports/report.html"
MONITORING_TEMPLATE = "reports/monitoring_report.html"
ORGANISATION_FIELD = "Organisation"
# CSS pixels (1/96 in) to PDF points (1/72 in).
PX_TO_PT = 0.75


@dataclass(frozen=True)
class EmbeddedFile:
    """A file embedded in the PDF as an associated file. ``relationship`` is PDF/A-3's AFRelationship:
    ``Source`` for the verdict documents the report is made from, ``Data`` for the tables, ``Supplement`` for
    the reviewed checkpoint's attributions (context, not a verdict)."""

    name: str
    data: bytes
    description: str
    relationship: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class SignatureBox:
    anchor: str
    field: str
    label: str


@dataclass(frozen=True)
class RenderedReport:
    pdf: bytes
    pages: int
    attachments: tuple[EmbeddedFile, ...]
    # The organisation's certification field first, then one per signatory, in the context's order.
    fields: tuple[FieldBox, ...]


def member_field(index: int) -> str:
    """The signature field of the context's ``index``-th signatory (1-based)."""
    return f"Member{index}"


def signature_boxes(context: ReportContext | MonitoringReportContext) -> list[SignatureBox]:
    boxes = [SignatureBox("signature-organisation", ORGANISATION_FIELD, f"Certified by {context.organisation}")]
    boxes += [
        SignatureBox(f"signature-member-{index}", member_field(index), f"{person.name}, {person.role}")
        for index, person in enumerate(context.signatories, start=1)
    ]
    return boxes


def embedded_files(context: ReportContext) -> tuple[EmbeddedFile, ...]:
    files: list[EmbeddedFile] = []
    for document in context.documents:
        files.append(
            EmbeddedFile(
                name=document_file_name(document),
                data=document.canonical.encode(),
                description=f"Frozen verdict document: {document.label} (canonical JSON)",
                relationship="Source",
            )
        )
        files.append(
            EmbeddedFile(
                name=f"groups-{document.short_hash}.csv",
                data=group_table_csv(document).encode(),
                description=f"Group table of {document.label} (CSV)",
                relationship="Data",
            )
        )
    for attribution in context.attributions:
        files.append(
            EmbeddedFile(
                name=f"attributions-{attribution.short_hash}.json",
                data=attribution.canonical.encode(),
                description=f"{attribution.label} (canonical JSON)",
                relationship="Supplement",
            )
        )
    return tuple(files)


def document_file_name(document: EvidenceDocument) -> str:
    return f"verdict-document-{document.short_hash}.json"


def render_html(context: ReportContext, *, attachments: tuple[EmbeddedFile, ...]) -> str:
    return render_to_string(
        TEMPLATE,
        {
            "report": context,
            "summary": context.summary,
            "findings": context.document_tables,
            "figures": [
                {"title": figure.title, "caption": figure.caption, "src": svg_data_uri(figure.svg)}
                for figure in context.figures
            ],
            "signature_boxes": signature_boxes(context),
            "attachments": attachments,
            "context_sha256": context.sha256,
        },
    )


def render(context: ReportContext, *, created: dt.datetime | None = None) -> RenderedReport:
    attachments = embedded_files(context)
    return _render(render_html(context, attachments=attachments), context, attachments, created=created)


def monitoring_embedded_files(context: MonitoringReportContext) -> tuple[EmbeddedFile, ...]:
    """A monitoring report's evidence: each incident's frozen document (its canonical bytes, whose
    SHA-256 is the incident's), the per-batch per-group counts (CSV), and the context itself (JSON)."""
    files = [
        EmbeddedFile(
            name=incident.file_name,
            data=incident.canonical.encode(),
            description=f"Frozen document of incident #{incident.id} (canonical JSON)",
            relationship="Source",
        )
        for incident in context.incidents
        if incident.canonical
    ]
    files.append(
        EmbeddedFile(
            name="batch-counts.csv",
            data=batch_counts_csv(context).encode(),
            description="Every batch of the period, per attribute and group (CSV)",
            relationship="Data",
        )
    )
    files.append(
        EmbeddedFile(
            name=f"monitoring-report-context-{context.sha256[:12]}.json",
            data=context.canonical,
            description="This report's context (canonical JSON): what every table of the report was made from",
            relationship="Source",
        )
    )
    return tuple(files)


def render_monitoring(
    context: MonitoringReportContext, *, figures: Sequence[Figure] = (), created: dt.datetime | None = None
) -> RenderedReport:
    """A monitoring report (docs/monitoring.md, "Monitoring reports"): its own template, the same
    fonts, stylesheet, fetcher, PDF/A-3b writer and signature boxes (the organisation's only).
    ``figures``: the period's charts as SVG (reports.figures.monitoring_figures), printed, not part of
    the context (drawn from the same looks, whose values the context's tables and files hold)."""
    attachments = monitoring_embedded_files(context)
    html = render_to_string(
        MONITORING_TEMPLATE,
        {
            "report": context,
            "summary": context.summary,
            "figures": [
                {"title": figure.title, "caption": figure.caption, "src": svg_data_uri(figure.svg)}
                for figure in figures
            ],
            "signature_boxes": signature_boxes(context),
            "attachments": attachments,
            "context_sha256": context.sha256,
        },
    )
    return _render(html, context, attachments, created=created)


def _render(
    html_text: str,
    context: ReportContext | MonitoringReportContext,
    attachments: tuple[EmbeddedFile, ...],
    *,
    created: dt.datetime | None,
) -> RenderedReport:
    # Imported here: WeasyPrint takes half a second to import, which every process that loads the
    # reports app (each management command, through the admin) would otherwise pay, rendering or not.
    from weasyprint import HTML, Attachment

    html = HTML(string=html_text, base_url=_base_url(), url_fetcher=static_fetcher())
    document = html.render()
    boxes = signature_boxes(context)
    fields = tuple(_field_box(document, box) for box in boxes)
    when = created or dt.datetime.now(dt.UTC)
    pdf = document.write_pdf(
        pdf_variant=PDF_VARIANT,
        attachments=[
            Attachment(
                string=item.data,
                name=item.name,
                description=item.description,
                relationship=item.relationship,
                created=when,
                modified=when,
            )
            for item in attachments
        ],
    )
    return RenderedReport(pdf=pdf, pages=len(document.pages), attachments=attachments, fields=fields)


def svg_data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def static_dir() -> Path:
    """The project's static/ folder: the report's stylesheet and fonts are read from it only."""
    return Path(settings.BASE_DIR) / "static"


def _base_url() -> str:
    return static_dir().as_uri() + "/"


def _field_box(document: Any, box: SignatureBox) -> FieldBox:
    for number, page in enumerate(document.pages):
        if box.anchor in page.anchors:
            left, top, right, bottom = page.anchors[box.anchor]
            height = page.height
            return FieldBox(
                name=box.field,
                page=number,
                box=(
                    round(left * PX_TO_PT),
                    round((height - bottom) * PX_TO_PT),
                    round(right * PX_TO_PT),
                    round((height - top) * PX_TO_PT),
                ),
            )
    raise RuntimeError(f"the report template drew no box #{box.anchor}")


def static_file(url: str) -> Path:
    """The file under static/ that the ``file:`` URL ``url`` names, or ``StaticFileRefused`` saying why.

    The path is percent-decoded once, before it is checked, as the opener would decode it (a check
    of the undecoded path let ``static/%2e%2e/...`` out). What is still encoded after that (``%252e``
    is ``%2e`` once decoded), a backslash, a NUL, a host other than this machine, a relative path:
    refused, not guessed at. The decoded path is resolved (``..`` and symbolic links followed) and
    must exist inside static/, resolved too.
    """
    root = static_dir().resolve()
    parts = urlsplit(url)
    if parts.scheme.lower() != "file":
        raise StaticFileRefused(f"the report may not fetch {url}")
    if parts.netloc not in {"", "localhost"}:
        raise StaticFileRefused(f"the report may not read {url}: a file on another host ({parts.netloc})")
    try:
        decoded = unquote(parts.path, errors="strict")
    except UnicodeDecodeError:
        raise StaticFileRefused(f"the report may not read {url}: its path is not UTF-8") from None
    for character, what in (("%", "encoded twice"), ("\\", "a backslash"), ("\0", "a NUL character")):
        if character in decoded:
            raise StaticFileRefused(f"the report may not read {url}: its path has {what}")
    path = Path(decoded)
    if not path.is_absolute():
        raise StaticFileRefused(f"the report may not read {url}: not an absolute path")
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise StaticFileRefused(f"the report may not read {url}: no such file under {root}") from None
    if not resolved.is_relative_to(root) or not resolved.is_file():
        raise StaticFileRefused(f"the report may not read {url}: only files under {root}")
    return resolved


def static_fetcher() -> URLFetcher:
    """WeasyPrint's URL fetcher for the report: ``data:`` URIs, and files under static/ (``static_file``);
    anything else stops the rendering."""
    from weasyprint.urls import FatalURLFetchingError, URLFetcher, URLFetcherResponse

    class StaticOnlyFetcher(URLFetcher):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(allowed_protocols={"file", "data"}, fail_on_errors=True)

        def fetch(self, url: str, headers: Any = None) -> URLFetcherResponse:
            if url.lower().startswith("data:"):
                return super().fetch(url, headers)
            try:
                path = static_file(url)
            except StaticFileRefused as refused:
                raise FatalURLFetchingError(str(refused)) from None
            # The checked file itself, by a URL that names only it: the opener decodes it to ``path``.
            return super().fetch(path.as_uri(), headers)

    return StaticOnlyFetcher()


class StaticFileRefused(Exception):
    """A URL the report may not fetch; the message says which and why."""
