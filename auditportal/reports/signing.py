"""The one module that signs: the portal's certificate authority and PDF signatures (docs/reports.md).

Keys and certificates are made with ``cryptography``; PDFs are signed with pyHanko (PAdES). Nothing here
touches the database: the reports services load and store keys and certificates and pass them in.

- The authority is a self-signed root; it issues the organisation's certificate (which certifies every
  report) and one certificate per committee member (issued when they first sign). Each certificate's
  subject carries the holder's name (CN), the organisation (O) and their role (title), so any reader
  of the PDF sees who signed in which capacity.
- Private keys leave this module only encrypted (PKCS #8, with the passphrase the settings read from
  ``REPORT_KEY_PASSPHRASE``): the database never holds one in clear.
- ``certify`` adds every later signature field first, then the organisation's certification signature
  (DocMDP: form filling and signatures allowed); ``sign_field`` adds one member's signature to its
  field as an incremental revision. Both draw a visible stamp with name, role and time.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

# cryptography, asn1crypto and pyHanko are imported by the functions that use them: together they take
# about 0.3 s to import, which every process that loads the reports app (each management command,
# through the admin) would otherwise pay, signing or not (tests/test_startup.py holds this).
if TYPE_CHECKING:
    from asn1crypto import x509 as asn1_x509
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import rsa
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.sign import signers

KEY_SIZE = 3072
# Reports are checked years later, and the portal has no time-stamping authority: a signature is
# judged with the certificates' validity at the time of checking, so they are long-lived.
AUTHORITY_VALIDITY = dt.timedelta(days=30 * 365)
CERTIFICATE_VALIDITY = dt.timedelta(days=15 * 365)
# Stamps show times in UTC, as every page of the portal does.
STAMP_TIME_FORMAT = "%Y-%m-%d %H:%M:%S UTC"
STAMP_FONT_SIZE = 8
# The characters a stamp may need: Latin, Latin-1 and Latin Extended-A/B, general punctuation.
# Part of the cached font's name: a change to how the stamp font is made gets a new file.
STAMP_FONT_RECIPE = "v2"
STAMP_FONT_UNICODES = [*range(0x20, 0x7F), *range(0xA0, 0x250), *range(0x2010, 0x2050), 0x20AC, 0x2212]


class KeyDecryptionError(ValueError):
    """A stored private key does not open with the configured passphrase."""


@dataclass(frozen=True)
class Credentials:
    """A certificate with its private key, and the issuing chain up to (and including) the root."""

    certificate: x509.Certificate
    private_key: rsa.RSAPrivateKey
    chain: tuple[x509.Certificate, ...]

    def __post_init__(self) -> None:
        if _public_der(self.private_key.public_key()) != _public_der(self.certificate.public_key()):
            raise ValueError(
                f"the private key does not belong to the certificate {self.certificate.subject.rfc4514_string()}"
            )


@dataclass(frozen=True)
class FieldBox:
    """A signature field: its name, its page (0 = first) and its box in PDF points (x1, y1, x2, y2),
    measured from the bottom-left corner."""

    name: str
    page: int
    box: tuple[int, int, int, int]


# --- keys and certificates ---------------------------------------------------------------------------


def new_private_key() -> rsa.RSAPrivateKey:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_SIZE)


def subject_name(*, common_name: str, organisation: str, title: str | None = None) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    attributes = [
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation),
    ]
    if title:
        attributes.append(x509.NameAttribute(NameOID.TITLE, title))
    return x509.Name(attributes)


def new_authority(
    *, common_name: str, organisation: str, now: dt.datetime
) -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    """A self-signed root that may issue end-entity certificates only (path length 0)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    key = new_private_key()
    name = subject_name(common_name=common_name, organisation=organisation)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + AUTHORITY_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(authority=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, certificate


def issue_certificate(
    *, authority: Credentials, common_name: str, organisation: str, title: str, now: dt.datetime
) -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    """A signing certificate issued by ``authority``: digital signature and non-repudiation (pyHanko's
    validator asks for both)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = new_private_key()
    authority_public_key = authority.certificate.public_key()
    assert isinstance(authority_public_key, rsa.RSAPublicKey)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject_name(common_name=common_name, organisation=organisation, title=title))
        .issuer_name(authority.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(min(now + CERTIFICATE_VALIDITY, authority.certificate.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(authority=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(authority_public_key), critical=False)
        .sign(authority.private_key, hashes.SHA256())
    )
    return key, certificate


def _key_usage(*, authority: bool) -> x509.KeyUsage:
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=not authority,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=authority,
        crl_sign=authority,
        encipher_only=False,
        decipher_only=False,
    )


def encrypt_private_key(key: rsa.RSAPrivateKey, *, passphrase: str) -> str:
    """PKCS #8 PEM, encrypted with the best scheme ``cryptography`` offers for it (AES-256, PBKDF2)."""
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(passphrase.encode()),
    ).decode()


def decrypt_private_key(pem: str, *, passphrase: str) -> rsa.RSAPrivateKey:
    """A stored key, opened. Without OpenSSL's RSA key validation (about 0.13 s for a 3072-bit key,
    three keys per report): the keys are the portal's own, made by ``new_private_key``; a key that does
    not belong to its certificate is refused where it is used (``Credentials``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        key = serialization.load_pem_private_key(
            pem.encode(), password=passphrase.encode(), unsafe_skip_rsa_key_validation=True
        )
    except (ValueError, TypeError) as exc:
        raise KeyDecryptionError("the key does not open with REPORT_KEY_PASSPHRASE") from exc
    if not isinstance(key, rsa.RSAPrivateKey):
        raise KeyDecryptionError("the stored key is not an RSA key")
    return key


def _public_der(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    der: bytes = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return der


def certificate_pem(certificate: x509.Certificate) -> str:
    from cryptography.hazmat.primitives import serialization

    return certificate.public_bytes(serialization.Encoding.PEM).decode()


def load_certificate(pem: str) -> x509.Certificate:
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem.encode())


def fingerprint(certificate: x509.Certificate) -> str:
    """SHA-256 of the certificate's DER bytes, as ``openssl x509 -fingerprint -sha256`` prints it (hex)."""
    from cryptography.hazmat.primitives import hashes

    return certificate.fingerprint(hashes.SHA256()).hex()


def to_asn1(certificate: x509.Certificate) -> asn1_x509.Certificate:
    from asn1crypto import x509 as asn1_x509
    from cryptography.hazmat.primitives import serialization

    return asn1_x509.Certificate.load(certificate.public_bytes(serialization.Encoding.DER))


# --- detached signatures over small documents (the activity log's exported heads) --------------------


def sign_bytes(data: bytes, *, private_key: rsa.RSAPrivateKey) -> bytes:
    """An RSA PKCS #1 v1.5 signature with SHA-256 over ``data``."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    return private_key.sign(data, padding.PKCS1v15(), hashes.SHA256())


def signature_holds(data: bytes, signature: bytes, *, certificate: x509.Certificate) -> bool:
    """Whether ``signature`` (sign_bytes) over ``data`` was made with the key of ``certificate``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    key = certificate.public_key()
    if not isinstance(key, rsa.RSAPublicKey):
        return False
    try:
        key.verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return False
    return True


def issued_by(certificate: x509.Certificate, authority: x509.Certificate) -> bool:
    """Whether ``authority`` issued ``certificate`` (its name and its signature on it)."""
    from cryptography.exceptions import InvalidSignature

    try:
        certificate.verify_directly_issued_by(authority)
    except (ValueError, TypeError, InvalidSignature):  # another issuer's name, key type, or signature
        return False
    return True


# --- PDF signatures ----------------------------------------------------------------------------------


def certify(
    pdf: bytes,
    *,
    credentials: Credentials,
    organisation: str,
    certification: FieldBox,
    later: Sequence[FieldBox],
    font: Path,
) -> bytes:
    """The organisation's certification signature on ``pdf`` (a PDF/A-3 file), with an empty signature
    field for each of ``later`` created first in the same revision (created after the certification,
    they would count as a change it does not allow)."""
    from pyhanko.pdf_utils import generic
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.sign import fields

    writer = IncrementalPdfFileWriter(io.BytesIO(pdf))
    # PDF/A: the Info dictionary and the XMP metadata must agree. pyHanko appends its name to the
    # Info producer but writes only its own into XMP; dropping the renderer's makes both say pyHanko.
    info = writer.trailer["/Info"].get_object() if "/Info" in writer.trailer else None
    if isinstance(info, generic.DictionaryObject) and "/Producer" in info:
        del info["/Producer"]
        writer.update_container(info)
    # WeasyPrint 70 lists each associated file twice in the catalogue's /AF (from the EmbeddedFiles
    # names, then from the file specifications): once each is what PDF/A-3 asks for.
    associated = writer.root.get("/AF")
    if isinstance(associated, generic.ArrayObject):
        unique = generic.ArrayObject()
        seen: set[tuple[int, int]] = set()
        for index in range(len(associated)):
            item = associated.raw_get(index)
            key = (item.idnum, item.generation) if isinstance(item, generic.IndirectObject) else (id(item), -1)
            if key not in seen:
                seen.add(key)
                unique.append(item)
        if len(unique) != len(associated):
            writer.root["/AF"] = unique
            writer.update_root()  # type: ignore[no-untyped-call]
    for spec in (certification, *later):
        # PDF/A wants an appearance on every widget, empty fields included.
        fields.append_signature_field(
            writer, fields.SigFieldSpec(spec.name, on_page=spec.page, box=spec.box, empty_field_appearance=True)
        )
    return _sign(
        writer,
        credentials=credentials,
        field_name=certification.name,
        certify=True,
        text=f"Certified by {organisation}\n%(ts)s",
        reason="Issued and certified by the audit portal",
        font=font,
    )


def sign_field(pdf: bytes, *, credentials: Credentials, field_name: str, role: str, font: Path) -> bytes:
    """One member's signature in their (existing, empty) field, as an incremental revision."""
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter

    writer = IncrementalPdfFileWriter(io.BytesIO(pdf))
    return _sign(
        writer,
        credentials=credentials,
        field_name=field_name,
        certify=False,
        text=f"Signed by %(signer)s\n{role}\n%(ts)s",
        reason=f"Signed as {role}",
        font=font,
    )


def _sign(
    writer: IncrementalPdfFileWriter,
    *,
    credentials: Credentials,
    field_name: str,
    certify: bool,
    text: str,
    reason: str,
    font: Path,
) -> bytes:
    from pyhanko import stamp
    from pyhanko.pdf_utils.font.opentype import GlyphAccumulatorFactory
    from pyhanko.pdf_utils.text import TextBoxStyle
    from pyhanko.sign import fields, signers

    metadata = signers.PdfSignatureMetadata(
        field_name=field_name,
        md_algorithm="sha256",
        subfilter=fields.SigSeedSubFilter.PADES,
        certify=certify,
        docmdp_permissions=fields.MDPPerm.FILL_FORMS,
        reason=reason,
    )
    style = stamp.TextStampStyle(
        stamp_text=text,
        text_box_style=TextBoxStyle(font=GlyphAccumulatorFactory(str(font), font_size=STAMP_FONT_SIZE)),
        border_width=1,
    )
    signer = signers.PdfSigner(metadata, _signer(credentials), stamp_style=style)
    now = dt.datetime.now(dt.UTC)
    output = signer.sign_pdf(
        writer, existing_fields_only=True, appearance_text_params={"ts": now.strftime(STAMP_TIME_FORMAT)}
    )
    return bytes(output.getbuffer())


@functools.cache
def _loaded_key_signer_class() -> Callable[..., signers.SimpleSigner]:
    """pyHanko's SimpleSigner, signing with the key already loaded: SimpleSigner parses the key's DER
    again for every raw signature (twice per PDF signature: once to measure it), with OpenSSL's RSA
    key validation each time, about 0.13 s for a 3072-bit key. Made on first use, so that loading this
    module imports neither pyHanko nor cryptography."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding
    from pyhanko.sign import signers

    digests: dict[str, hashes.HashAlgorithm] = {
        "sha256": hashes.SHA256(),
        "sha384": hashes.SHA384(),
        "sha512": hashes.SHA512(),
    }

    class LoadedKeySigner(signers.SimpleSigner):
        def __init__(self, *, private_key: rsa.RSAPrivateKey, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._private_key = private_key

        def sign_raw(self, data: bytes, digest_algorithm: str) -> bytes:
            mechanism = self.get_signature_mechanism_for_digest(digest_algorithm).signature_algo
            if mechanism != "rsassa_pkcs1v15":
                raise ValueError(f"the report keys sign with rsassa_pkcs1v15, not {mechanism}")
            digest = digests.get(digest_algorithm)
            if digest is None:
                raise ValueError(f"the report signatures use SHA-2 digests, not {digest_algorithm}")
            return self._private_key.sign(data, padding.PKCS1v15(), digest)

    return LoadedKeySigner


def _signer(credentials: Credentials) -> signers.SimpleSigner:
    from asn1crypto import keys as asn1_keys
    from cryptography.hazmat.primitives import serialization
    from pyhanko_certvalidator.registry import SimpleCertificateStore

    key = asn1_keys.PrivateKeyInfo.load(
        credentials.private_key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return _loaded_key_signer_class()(
        private_key=credentials.private_key,
        signing_cert=to_asn1(credentials.certificate),
        signing_key=key,
        cert_registry=SimpleCertificateStore.from_certs(  # type: ignore[no-untyped-call]
            [to_asn1(item) for item in credentials.chain]
        ),
    )


# --- the stamp font -----------------------------------------------------------------------------------


def stamp_font(source: Path, cache_dir: Path) -> Path:
    """``source`` subset to the stamp's characters and rescaled to 1000 units per em, made once and cached.

    pyHanko 0.38 writes TrueType widths in font units, so a 2048-unit font (DejaVu) comes out stretched;
    scaling the whole font takes seconds, the subset a second, once per deployment.
    """
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    target = cache_dir / f"stamp-{digest}-1000upem-{STAMP_FONT_RECIPE}.ttf"
    if target.exists():
        return target
    from fontTools import subset
    from fontTools.ttLib import TTFont
    from fontTools.ttLib.scaleUpem import scale_upem

    font = TTFont(str(source))
    options = subset.Options()
    # No layout tables (GSUB, GPOS): pyHanko subsets the stamp font again for every signature, and
    # reading DejaVu's layout tables was most of that; a stamp's few Latin lines need no shaping.
    options.layout_features = []
    options.name_IDs = ["*"]
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=STAMP_FONT_UNICODES)
    subsetter.subset(font)
    scale_upem(font, 1000)
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    font.save(str(partial))
    partial.replace(target)  # atomic: a concurrent maker writes the same bytes
    return target
