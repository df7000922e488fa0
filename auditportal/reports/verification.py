"""Checking the signatures of a PDF with pyHanko, against given trust roots, fetching nothing (docs/reports.md).

For every signature: who signed (the certificate's common name), in which role (its title), when (the
time the signer's software wrote into the signature: a claim, not a proof), whether the signed bytes
are unchanged (intact) and the signature cryptographically valid, whether the signer's certificate
chains to one of the trust roots, and whether the file was changed after the signature in a way its
certification does not allow (pyHanko's difference analysis). Comparing the file with the reports the
portal stored is the selector's part (reports.selectors.report_verify).

An uploaded file is anyone's: its verification costs more than linearly in its signatures, so
``verify_pdf_bounded`` refuses a file with more signatures or revisions than a portal report can
have before checking any, and checks in a child process under CPU time and memory limits
(lib/isolation). A field that cannot be read (a malformed /M date or /ByteRange) fails that signature
with the reason, never the request.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from auditportal.lib.isolation import ChildFailed, LimitExceeded, Limits, run_limited
from auditportal.reports.signing import to_asn1

if TYPE_CHECKING:
    from asn1crypto import x509 as asn1_x509
    from cryptography import x509
    from pyhanko.sign.validation.pdf_embedded import EmbeddedPdfSignature

# What the checking process's fork server imports once (lib/isolation), so that each check need not.
_PRELOAD = (
    "auditportal.reports.verification",
    "pyhanko.pdf_utils.reader",
    "pyhanko.sign.validation",
    "pyhanko_certvalidator",
)

# pyHanko's ModificationLevel, by member name (pyHanko is imported only when a PDF is checked: it takes
# a quarter of a second, which every process loading the reports app would otherwise pay).
_MODIFICATIONS = {
    "NONE": "none",
    "LTA_UPDATES": "validation data only",
    "FORM_FILLING": "form filling and signatures",
    "ANNOTATIONS": "annotations",
    "OTHER": "other changes",
}


@dataclass(frozen=True)
class SignatureCheck:
    field: str
    signer: str
    role: str
    organisation: str
    signed_at: dt.datetime | None
    certification: bool
    intact: bool
    valid: bool
    # Whether the signer's certificate chains to a trusted root; None when not judged: the signed
    # bytes were changed (a digest mismatch says nothing about who signed) or could not be read.
    trusted: bool | None
    # True when bytes follow the signed ones (later revisions).
    modified_after: bool
    # What those later revisions change, as pyHanko classifies it; "none" when nothing follows.
    modification: str
    # Whether those changes are allowed by the document's certification (DocMDP).
    modification_allowed: bool
    # SHA-256 of the bytes this signature covers: the file as it was when signed.
    signed_sha256: str
    certificate_fingerprint: str
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class PdfVerification:
    sha256: str
    size: int
    signatures: tuple[SignatureCheck, ...]
    # Set when the file was not verified: it cannot be read as a PDF at all, or it is past a bound
    # (signatures, revisions, time, memory).
    error: str | None = None

    @property
    def problems(self) -> list[str]:
        found = [self.error] if self.error else []
        if self.error is None and not self.signatures:
            found.append("the file has no signature")
        for check in self.signatures:
            found += [f"signature {check.field!r}: {problem}" for problem in check.problems]
        return found

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Bounds:
    """What one verification may take (settings REPORT_VERIFY_*)."""

    max_signatures: int
    max_revisions: int
    cpu_seconds: int
    memory_bytes: int

    @property
    def wall_seconds(self) -> float:
        # A loaded machine gives the child less than a core: room for that, but not without end.
        return 3.0 * self.cpu_seconds + 5.0


def verify_pdf_bounded(data: bytes, *, trust_roots: Sequence[x509.Certificate], bounds: Bounds) -> PdfVerification:
    """``verify_pdf`` for an uploaded file: in a child process under ``bounds``' limits, refusing a file
    past its signature and revision caps before checking any signature. Every way it can fail is an
    answer (``error`` set), never an exception."""
    from cryptography.hazmat.primitives import serialization

    roots = [root.public_bytes(serialization.Encoding.DER) for root in trust_roots]
    limits = Limits(cpu_seconds=bounds.cpu_seconds, memory_bytes=bounds.memory_bytes, wall_seconds=bounds.wall_seconds)
    try:
        return run_limited(
            _verify_capped, data, roots, bounds.max_signatures, bounds.max_revisions, limits=limits, preload=_PRELOAD
        )
    except LimitExceeded as exc:
        if exc.kind == "memory":
            error = (
                f"checking the file needed more than the {_mib(bounds.memory_bytes)} MiB of memory allowed "
                "(REPORT_VERIFY_MAX_MEMORY), so it was stopped: not a valid report"
            )
        else:
            error = (
                f"verification took too long: checking the file took longer than the {bounds.cpu_seconds} s "
                "allowed (REPORT_VERIFY_CPU_SECONDS), so it was stopped; a report of this portal takes a second "
                "or two"
            )
    except ChildFailed as exc:
        error = f"the check failed on this file ({exc}): not a valid report"
    return PdfVerification(sha256=hashlib.sha256(data).hexdigest(), size=len(data), signatures=(), error=error)


def _mib(size: int) -> int:
    return size // 1024**2


def _verify_capped(data: bytes, roots_der: list[bytes], max_signatures: int, max_revisions: int) -> PdfVerification:
    """In the checking process: the caps, then every signature."""
    from asn1crypto import x509 as asn1_x509

    return verify_pdf(
        data,
        asn1_roots=[asn1_x509.Certificate.load(der) for der in roots_der],
        max_signatures=max_signatures,
        max_revisions=max_revisions,
    )


def verify_pdf(
    data: bytes,
    *,
    trust_roots: Sequence[x509.Certificate] = (),
    asn1_roots: Sequence[asn1_x509.Certificate] = (),
    max_signatures: int | None = None,
    max_revisions: int | None = None,
) -> PdfVerification:
    """Every signature of ``data`` checked, in this process and without limits (``verify_pdf_bounded``
    for a file from outside). A file with more revisions or signatures than the caps given is refused
    (``error``) before any signature is checked: counting them is cheap, checking them is not."""
    from pyhanko.pdf_utils.reader import PdfFileReader

    sha256 = hashlib.sha256(data).hexdigest()

    def refused(error: str) -> PdfVerification:
        return PdfVerification(sha256=sha256, size=len(data), signatures=(), error=error)

    try:
        reader = PdfFileReader(io.BytesIO(data))
        revisions = reader.xrefs.total_revisions
        if max_revisions is not None and revisions > max_revisions:
            return refused(
                f"the file has {revisions} revisions (incremental updates), more than the {max_revisions} a "
                "report of this portal can have (REPORT_VERIFY_MAX_REVISIONS): not a valid report, not checked"
            )
        embedded = list(reader.embedded_signatures)
    except Exception as exc:  # pyHanko raises several kinds for a file that is not a readable PDF
        return refused(f"not a readable PDF: {exc}")
    if max_signatures is not None and len(embedded) > max_signatures:
        return refused(
            f"the file has {len(embedded)} signatures, more than the {max_signatures} a report of this portal "
            "can have (REPORT_VERIFY_MAX_SIGNATURES): not a valid report, not checked"
        )
    roots = [*(to_asn1(root) for root in trust_roots), *asn1_roots]
    checks = tuple(_check_readable(signature, data, roots) for signature in embedded)
    return PdfVerification(sha256=sha256, size=len(data), signatures=checks)


def _check_readable(signature: EmbeddedPdfSignature, data: bytes, roots: list[asn1_x509.Certificate]) -> SignatureCheck:
    """``_check``, or, for a signature whose fields cannot be read, a failed check that says why."""
    try:
        return _check(signature, data, roots)
    except Exception as exc:  # a hostile file's fields fail in many ways; each is a failed signature
        return _unreadable(signature, f"cannot be read: {exc}")


def _unreadable(signature: EmbeddedPdfSignature, problem: str) -> SignatureCheck:
    try:
        name = str(signature.field_name)
    except Exception:
        name = "?"
    return SignatureCheck(
        field=name,
        signer="",
        role="",
        organisation="",
        signed_at=None,
        certification=False,
        intact=False,
        valid=False,
        trusted=None,
        modified_after=False,
        modification="unknown",
        modification_allowed=False,
        signed_sha256="",
        certificate_fingerprint="",
        problems=(problem,),
    )


def _check(signature: EmbeddedPdfSignature, data: bytes, roots: list[asn1_x509.Certificate]) -> SignatureCheck:
    from pyhanko.sign.validation import validate_pdf_signature
    from pyhanko.sign.validation.status import SignatureCoverageLevel
    from pyhanko_certvalidator import ValidationContext

    byte_range = _byte_range(signature, len(data))
    if byte_range is None:
        return _unreadable(
            signature,
            "its /ByteRange is not four whole numbers marking the signed bytes within the file: not a valid signature",
        )
    signed_at, date_problem = _signing_time(signature)
    certificate = signature.signer_cert
    subject = certificate.subject.native
    signed_end = byte_range[2] + byte_range[3]
    # As judged when validation fails outright; replaced below by what validation found.
    check = SignatureCheck(
        field=str(signature.field_name),
        signer=str(subject.get("common_name", "")),
        role=str(subject.get("title", "")),
        organisation=str(subject.get("organization_name", "")),
        signed_at=signed_at,
        certification=signature.docmdp_level is not None,
        intact=False,
        valid=False,
        trusted=None,
        modified_after=signed_end != len(data),
        modification="unknown",
        modification_allowed=False,
        signed_sha256=hashlib.sha256(data[:signed_end]).hexdigest(),
        certificate_fingerprint=hashlib.sha256(certificate.dump()).hexdigest(),
        problems=(),
    )
    context = ValidationContext(trust_roots=roots, allow_fetching=False)
    if date_problem is not None:
        # pyHanko's validation reads /M too, and would only say it cannot.
        return replace(check, problems=(date_problem,))
    try:
        status = validate_pdf_signature(signature, context)
    except Exception as exc:  # a tampered signature fails in many ways; each is a failed check
        return replace(check, problems=(f"cannot be validated: {exc}",))
    modified_after = status.coverage != SignatureCoverageLevel.ENTIRE_FILE
    level = status.modification_level
    modification = _MODIFICATIONS.get(level.name, str(level)) if modified_after and level is not None else "none"
    allowed = bool(status.docmdp_ok) if modified_after else True
    problems: list[str] = []
    intact = bool(status.intact)
    if not intact:
        # Who signed is not judged: pyHanko stops before the certificate's path, and "untrusted" would
        # blame the signer for a change made after them.
        problems.append(
            "the signed bytes were changed: the document was modified after this signature was made (digest mismatch)"
        )
    elif not status.valid:
        problems.append("the signature value is not valid for its certificate")
    trusted = bool(status.trusted) if intact else None
    if trusted is False:
        problems.append("the signer's certificate does not chain to a trusted portal certificate authority")
    if status.coverage not in (SignatureCoverageLevel.ENTIRE_FILE, SignatureCoverageLevel.ENTIRE_REVISION):
        problems.append("the signature does not cover a whole revision of the file")
    if modified_after and not allowed:
        problems.append(f"the file was modified after this signature ({modification}), which is not allowed")
    return replace(
        check,
        signed_at=status.signer_reported_dt,
        intact=intact,
        valid=bool(status.valid),
        trusted=trusted,
        modified_after=modified_after,
        modification=modification,
        modification_allowed=allowed,
        problems=tuple(problems),
    )


def _byte_range(signature: EmbeddedPdfSignature, size: int) -> list[int] | None:
    """The signature's /ByteRange as four offsets if they mark two ranges in order within the file:
    the signed bytes before the signature value and after it. None otherwise."""
    try:
        values = list(signature.byte_range)
    except Exception:
        return None
    if len(values) != 4 or not all(isinstance(value, int) and not isinstance(value, bool) for value in values):
        return None
    start, first, second, rest = (int(value) for value in values)
    if start != 0 or min(first, second, rest) < 0 or second < first or second + rest > size:
        return None
    return [start, first, second, rest]


def _signing_time(signature: EmbeddedPdfSignature) -> tuple[dt.datetime | None, str | None]:
    """The time the signer's software wrote (/M), or the problem with it; no /M is no time, no problem."""
    try:
        return signature.self_reported_timestamp, None
    except Exception as exc:  # pyHanko raises PdfReadError, and ValueError underneath
        return None, f"its signing time (/M) is not a valid PDF date ({exc}): not a valid signature"
