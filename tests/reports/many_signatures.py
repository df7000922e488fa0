# pyHanko's writer and signer methods carry no annotations.
# mypy: disable-error-code="no-untyped-call"
"""A small PDF with many signatures (foreign: its own throw-away authority), for the bounds on
verification. Nothing of the portal's database: the keys come from the caller."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from typing import TYPE_CHECKING
from unittest import mock

from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
from pyhanko.pdf_utils.writer import PageObject, PdfFileWriter
from pyhanko.sign import fields, signers

from auditportal.reports import signing

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa


def blank_pdf() -> bytes:
    writer = PdfFileWriter()
    writer.insert_page(
        PageObject(contents=writer.add_object(generic.StreamObject(stream_data=b"")), media_box=(0, 0, 200, 200))
    )
    output = io.BytesIO()
    writer.write(output)
    return output.getvalue()


def signed_many_times(count: int, *, key: Callable[[], rsa.RSAPrivateKey]) -> bytes:
    """A blank page signed ``count`` times, each signature in a new field of its own revision (as a
    foreign file might arrive), by one signer under a root of its own."""
    now = dt.datetime.now(dt.UTC)
    with mock.patch.object(signing, "new_private_key", key):
        root_key, root = signing.new_authority(common_name="Foreign root", organisation="Elsewhere", now=now)
        authority = signing.Credentials(certificate=root, private_key=root_key, chain=(root,))
        signer_key, certificate = signing.issue_certificate(
            authority=authority, common_name="Someone", organisation="Elsewhere", title="Signer", now=now
        )
    signer = signing._signer(signing.Credentials(certificate=certificate, private_key=signer_key, chain=(root,)))
    data = blank_pdf()
    for number in range(1, count + 1):
        writer = IncrementalPdfFileWriter(io.BytesIO(data))
        name = f"Signature{number}"
        fields.append_signature_field(writer, fields.SigFieldSpec(name, on_page=0, box=(10, 10, 20, 20)))
        metadata = signers.PdfSignatureMetadata(field_name=name, md_algorithm="sha256")
        data = bytes(signers.PdfSigner(metadata, signer).sign_pdf(writer).getbuffer())
    return data
