"""Checking the signatures of a PDF with pyHanko, against given trust roots, fetching nothing (docs/reports.md).

For every signature: who signed (the certificate's common name), in which role (its title), when (the
time the signer's software wrote into the signature: a claim, not a proof), whether the signed bytes
are unchanged (intact) and the signature cryptographically valid, whether the signer's certificate
chains to one of the trust roots, and whether the file was changed after the signature in a way its
certification does not allow (pyHanko's difference analysis). Comparing the file with the reports the
portal stored is the selector's part (reports.selectors.report_verify).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from auditportal.reports.signing import to_asn1

if TYPE_CHECKING:
    from asn1crypto import x509 as asn1_x509
    from cryptography import x509
    from pyhanko.sign.validation.pdf_embedded import EmbeddedPdfSignature

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
    trusted: bool
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
    # Set when the file cannot be read as a PDF at all.
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


def verify_pdf(data: bytes, *, trust_roots: Sequence[x509.Certificate]) -> PdfVerification:
    from pyhanko.pdf_utils.reader import PdfFileReader

    sha256 = hashlib.sha256(data).hexdigest()
    try:
        reader = PdfFileReader(io.BytesIO(data))
        embedded = list(reader.embedded_signatures)
    except Exception as exc:  # pyHanko raises several kinds for a file that is not a readable PDF
        return PdfVerification(sha256=sha256, size=len(data), signatures=(), error=f"not a readable PDF: {exc}")
    roots = [to_asn1(root) for root in trust_roots]
    checks = tuple(_check(signature, data, roots) for signature in embedded)
    return PdfVerification(sha256=sha256, size=len(data), signatures=checks)


def _check(signature: EmbeddedPdfSignature, data: bytes, roots: list[asn1_x509.Certificate]) -> SignatureCheck:
    from pyhanko.sign.validation import validate_pdf_signature
    from pyhanko.sign.validation.status import SignatureCoverageLevel
    from pyhanko_certvalidator import ValidationContext

    certificate = signature.signer_cert
    subject = certificate.subject.native
    byte_range = [int(value) for value in signature.byte_range]
    signed_end = byte_range[2] + byte_range[3]
    # As judged when validation fails outright; replaced below by what validation found.
    check = SignatureCheck(
        field=str(signature.field_name),
        signer=str(subject.get("common_name", "")),
        role=str(subject.get("title", "")),
        organisation=str(subject.get("organization_name", "")),
        signed_at=signature.self_reported_timestamp,
        certification=signature.docmdp_level is not None,
        intact=False,
        valid=False,
        trusted=False,
        modified_after=signed_end != len(data),
        modification="unknown",
        modification_allowed=False,
        signed_sha256=hashlib.sha256(data[:signed_end]).hexdigest(),
        certificate_fingerprint=hashlib.sha256(certificate.dump()).hexdigest(),
        problems=(),
    )
    context = ValidationContext(trust_roots=roots, allow_fetching=False)
    try:
        status = validate_pdf_signature(signature, context)
    except Exception as exc:  # a tampered signature fails in many ways; each is a failed check
        return replace(check, problems=(f"cannot be validated: {exc}",))
    modified_after = status.coverage != SignatureCoverageLevel.ENTIRE_FILE
    level = status.modification_level
    modification = _MODIFICATIONS.get(level.name, str(level)) if modified_after and level is not None else "none"
    allowed = bool(status.docmdp_ok) if modified_after else True
    problems: list[str] = []
    if not status.intact:
        problems.append("the signed bytes were changed (digest mismatch)")
    if not status.valid:
        problems.append("the signature value is not valid for its certificate")
    if not status.trusted:
        problems.append("the signer's certificate does not chain to a trusted portal certificate authority")
    if status.coverage not in (SignatureCoverageLevel.ENTIRE_FILE, SignatureCoverageLevel.ENTIRE_REVISION):
        problems.append("the signature does not cover a whole revision of the file")
    if modified_after and not allowed:
        problems.append(f"the file was modified after this signature ({modification}), which is not allowed")
    return replace(
        check,
        signed_at=status.signer_reported_dt,
        intact=bool(status.intact),
        valid=bool(status.valid),
        trusted=bool(status.trusted),
        modified_after=modified_after,
        modification=modification,
        modification_allowed=allowed,
        problems=tuple(problems),
    )
