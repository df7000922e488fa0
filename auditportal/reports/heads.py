"""The activity log's head, anchored outside the database (docs/governance.md, "The activity log").

Two kinds of anchor hold the log to what it was, so that whoever can delete its newest events (or
empty it) cannot do so unseen:

- every signed report embeds the head when its decision was taken (``ReportContext.chain_head``);
- an administrator, or the beat schedule, exports a *signed head*: a small JSON file with the head's
  seq and hash, signed with the organisation's report key (``signing.sign_bytes`` over the canonical
  JSON of ``head``), kept wherever the database's administrators cannot reach.

``manage.py verify_audit_log`` holds the chain to both (activity.selectors.chain_verify's anchors).
The reports app reads them because the reports and the signing key live here: activity sits below.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.activity.selectors import Anchor, chain_head
from auditportal.activity.services import event_record
from auditportal.fairness.documents.canonical import canonical_json
from auditportal.fairness.errors import UserError
from auditportal.reports import rules, services, signing
from auditportal.reports.models import CertificateKind, Report, SigningCertificate

HEAD_KIND = "auditportal.activity-log-head"
HEAD_VERSION = 1
SIGNATURE_ALGORITHM = "rsa-pkcs1v15-sha256"
# A head file is a few kilobytes (the certificate is most of it).
MAX_HEAD_FILE = 64 * 1024


class HeadFileError(UserError):
    """A head file that is not one the portal signed, or says something else than it did."""


def report_anchors() -> Iterator[Anchor]:
    """The head every stored report embeds (reports made before the chain existed have none)."""
    for report_id, context_json in Report.objects.order_by("id").values_list("id", "context_json").iterator():
        head = json.loads(context_json).get("chain_head")
        if isinstance(head, dict) and isinstance(head.get("seq"), int) and isinstance(head.get("hash"), str):
            yield Anchor(source=f"report #{report_id}", seq=head["seq"], hash=head["hash"])


def head_export(*, actor: User | None, at: datetime | None = None) -> dict[str, Any]:
    """The log's current head, signed with the organisation's key: the content of a head file.

    Administrators only (``actor`` None: the system, for the beat schedule). Refused while the log is
    empty: there is nothing to anchor.
    """
    if actor is not None:
        rules.check_export_log_head(actor)
    if chain_head() is None:
        raise UserError("The activity log is empty: there is no head to export.")
    # The key first: made on first use, it writes events, and the head signed is the one after them.
    credentials = services.organisation_credentials(actor=actor)
    head = chain_head()
    assert head is not None
    signed = {
        "kind": HEAD_KIND,
        "version": HEAD_VERSION,
        "seq": head[0],
        "hash": head[1],
        "exported_at": (at or timezone.now()).isoformat(),
        "exported_by": actor.get_username() if actor is not None else "",
        "organisation": settings.REPORT_ORGANISATION,
    }
    signature = signing.sign_bytes(canonical_json(signed), private_key=credentials.private_key)
    return {
        "head": signed,
        "signature": {
            "algorithm": SIGNATURE_ALGORITHM,
            "value": base64.b64encode(signature).decode(),
            "certificate": signing.certificate_pem(credentials.certificate),
        },
    }


def head_file_write(*, path: Path, content: dict[str, Any]) -> None:
    """Write a head file at ``path`` whole or not at all (a reader never sees half a file); an existing
    file is never replaced."""
    text = json.dumps(content, indent=2, sort_keys=True) + "\n"
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".head-", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.link(temporary, path)  # fails if path exists, unlike a rename
    finally:
        os.unlink(temporary)


def head_export_record(*, actor: User, path: Path, content: dict[str, Any]) -> Event:
    """Record that ``actor`` exported the head file ``content`` as ``path`` (call once it is written).

    The event comes after the head it anchors (its seq is the exported one's + 1), so the file still
    anchors the log. Its target is the organisation certificate that signed the file, so the log
    answers "what has this key signed"; the actor is the event's own. Only the file's name is kept:
    where head files are kept is what the database's administrators should not learn.
    The beat's scheduled export records nothing (head_export_scheduled): every export would move the
    head it had just anchored, and the next one would have a new head to export.
    """
    rules.check_export_log_head(actor)
    certificate = signing.load_certificate(content["signature"]["certificate"])
    signer = SigningCertificate.objects.get(
        kind=CertificateKind.ORGANISATION, fingerprint=signing.fingerprint(certificate)
    )
    head = content["head"]
    with transaction.atomic():
        return event_record(
            actor=actor,
            verb=Verb.ACTIVITY_LOG_HEAD_EXPORTED,
            target=signer,
            data={"seq": head["seq"], "hash": head["hash"], "file": path.name},
        )


def head_export_scheduled() -> Path | None:
    """Export the head into settings.AUDIT_LOG_HEAD_DIR (the beat schedule); the file, or None while
    the log is empty. One file per head: a head already exported is not written again. No event: it
    would be a new head, which the next run would export again (head_export_record)."""
    if settings.AUDIT_LOG_HEAD_DIR is None:
        raise RuntimeError("AUDIT_LOG_HEAD_DIR is not set: there is nowhere to export the head to")
    directory = Path(settings.AUDIT_LOG_HEAD_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    head = chain_head()
    if head is None:
        return None
    path = directory / f"activity-head-{head[0]:012d}-{head[1][:16]}.json"
    if path.exists():
        return path
    content = head_export(actor=None)
    # The head may have moved on while the key was loaded: name the file after what was signed.
    signed = content["head"]
    path = directory / f"activity-head-{signed['seq']:012d}-{signed['hash'][:16]}.json"
    if not path.exists():
        head_file_write(path=path, content=content)
    return path


def head_files_in(directory: Path) -> list[Path]:
    return sorted(directory.glob("activity-head-*.json"))


def head_file_anchor(*, data: bytes, source: str) -> Anchor:
    """The head a file the portal signed records; HeadFileError names what is wrong with any other.

    The signature must hold with an organisation certificate the portal issued (stored, and issued by
    one of its stored authorities). The command prints the authority's fingerprint: compare it with
    the one you keep, since whoever can write the database could add an authority of their own.
    """
    head, signature, certificate = _parse(data, source)
    organisation = SigningCertificate.objects.filter(kind=CertificateKind.ORGANISATION).select_related("authority")
    stored = organisation.filter(fingerprint=signing.fingerprint(certificate)).first()
    if stored is None:
        raise HeadFileError(f"{source}: signed with a certificate that is not one of the portal's organisation keys.")
    if not signing.issued_by(certificate, signing.load_certificate(stored.authority.certificate_pem)):
        raise HeadFileError(
            f"{source}: its certificate was not issued by the portal's authority #{stored.authority_id}."
        )
    if not signing.signature_holds(canonical_json(head), signature, certificate=certificate):
        raise HeadFileError(f"{source}: the signature does not hold: the head was changed after it was signed.")
    return Anchor(source=f"{source} (authority {stored.authority.fingerprint})", seq=head["seq"], hash=head["hash"])


def _parse(data: bytes, source: str) -> tuple[dict[str, Any], bytes, Any]:
    if len(data) > MAX_HEAD_FILE:
        raise HeadFileError(f"{source}: {len(data)} bytes, more than a head file's {MAX_HEAD_FILE}.")
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HeadFileError(f"{source}: not JSON ({exc}).") from None
    head = document.get("head") if isinstance(document, dict) else None
    signature = document.get("signature") if isinstance(document, dict) else None
    if not isinstance(head, dict) or not isinstance(signature, dict):
        raise HeadFileError(f"{source}: not a head file (no head and signature objects).")
    if head.get("kind") != HEAD_KIND or head.get("version") != HEAD_VERSION:
        raise HeadFileError(f"{source}: head.kind/version: expected {HEAD_KIND} version {HEAD_VERSION}.")
    seq, value = head.get("seq"), head.get("hash")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise HeadFileError(f"{source}: head.seq: expected a positive whole number.")
    if not isinstance(value, str) or len(value) != 64 or value.strip("0123456789abcdef"):
        raise HeadFileError(f"{source}: head.hash: expected 64 lower-case hexadecimal digits.")
    if signature.get("algorithm") != SIGNATURE_ALGORITHM:
        raise HeadFileError(f"{source}: signature.algorithm: expected {SIGNATURE_ALGORITHM}.")
    try:
        signed = base64.b64decode(str(signature.get("value")), validate=True)
    except (binascii.Error, ValueError):
        raise HeadFileError(f"{source}: signature.value: not base64.") from None
    try:
        certificate = signing.load_certificate(str(signature.get("certificate")))
    except ValueError:
        raise HeadFileError(f"{source}: signature.certificate: not a PEM certificate.") from None
    return head, signed, certificate
