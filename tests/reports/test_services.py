from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.fairness.errors import UserError
from auditportal.reports import services, signing
from auditportal.reports.models import (
    CertificateAuthority,
    CertificateKind,
    Report,
    ReportRevision,
    RevisionKind,
    SigningCertificate,
)
from auditportal.reports.selectors import report_verify
from auditportal.reports.tasks import report_generate_task
from tests.factories import PASSWORD
from tests.reports.helpers import SignedReport, decided_context

pytestmark = pytest.mark.django_db


def _verbs() -> list[str]:
    return list(Event.objects.order_by("seq").values_list("verb", flat=True))


def test_generating_creates_the_authority_the_organisation_key_and_the_certified_report(
    audit: PredictionAudit, dataset_version: DatasetVersion, member_dave: User
) -> None:
    before = Event.objects.count()
    report = services.report_generate(context=decided_context(audit, dataset_version, [member_dave]))
    revision = report.revisions.get()
    assert revision.number == 1
    assert revision.kind == RevisionKind.CERTIFIED
    assert revision.signer is None
    assert revision.certificate.kind == CertificateKind.ORGANISATION
    data = revision.path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == revision.sha256
    assert revision.size_bytes == len(data)
    assert not revision.path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert _verbs()[before:] == [
        Verb.CERTIFICATE_AUTHORITY_CREATED,
        Verb.SIGNING_CERTIFICATE_ISSUED,
        Verb.REPORT_CREATED,
    ]
    created = Event.objects.get(verb=Verb.REPORT_CREATED)
    assert created.data["sha256"] == revision.sha256
    assert created.data["context_sha256"] == report.context_sha256
    assert created.data["signatories"] == ["dave"]


def test_the_same_context_is_generated_once(
    audit: PredictionAudit, dataset_version: DatasetVersion, member_dave: User
) -> None:
    context = decided_context(audit, dataset_version, [member_dave])
    first = services.report_generate(context=context)
    events = Event.objects.count()
    again = services.report_generate(context=context)
    assert again.pk == first.pk
    assert Report.objects.count() == 1
    assert ReportRevision.objects.count() == 1
    assert Event.objects.count() == events


def test_the_task_generates_from_the_context_as_json(
    audit: PredictionAudit, dataset_version: DatasetVersion, member_dave: User
) -> None:
    context = decided_context(audit, dataset_version, [member_dave])
    report_id = report_generate_task.apply(args=[context.as_json(), member_dave.pk]).get()
    report = Report.objects.get(pk=report_id)
    assert report.context_sha256 == context.sha256
    assert report.created_by == member_dave
    assert report_generate_task.apply(args=[context.as_json(), None]).get() == report_id


def test_a_member_signature_is_a_new_revision_and_the_old_file_stays(signed_report: SignedReport) -> None:
    first, second, third = signed_report.revisions
    assert [revision.number for revision in signed_report.revisions] == [1, 2, 3]
    assert [revision.signer.username if revision.signer else None for revision in signed_report.revisions] == [
        None,
        "dave",
        "fay",
    ]
    for revision in signed_report.revisions:
        assert hashlib.sha256(revision.path.read_bytes()).hexdigest() == revision.sha256
    # Each revision appends to the one before: the earlier bytes are the start of the later file.
    assert second.path.read_bytes().startswith(first.path.read_bytes())
    assert third.path.read_bytes().startswith(second.path.read_bytes())
    signed = Event.objects.filter(verb=Verb.REPORT_SIGNED).order_by("seq")
    assert [(event.actor_username, event.data["revision"], event.data["previous_sha256"]) for event in signed] == [
        ("dave", 2, first.sha256),
        ("fay", 3, second.sha256),
    ]
    assert SigningCertificate.objects.filter(kind=CertificateKind.MEMBER).count() == 2


def test_a_member_signs_once(signed_report: SignedReport, member_dave: User) -> None:
    with pytest.raises(services.AlreadySigned, match="dave has already signed report"):
        services.report_sign_member(report=signed_report.report, member=member_dave, password=PASSWORD)
    assert signed_report.report.revisions.count() == 3


def test_only_listed_committee_members_sign(
    audit: PredictionAudit, dataset_version: DatasetVersion, member_dave: User, member_fay: User, carol: User
) -> None:
    report = services.report_generate(context=decided_context(audit, dataset_version, [member_dave]))
    with pytest.raises(services.NotASignatory, match="fay is not among the signatories"):
        services.report_sign_member(report=report, member=member_fay, password=PASSWORD)
    with pytest.raises(PermissionDenied, match="Only an ethics-committee member can sign a report"):
        services.report_sign_member(report=report, member=carol, password=PASSWORD)
    assert report.revisions.count() == 1


def test_a_stored_file_changed_on_disk_is_not_signed_on(
    audit: PredictionAudit, dataset_version: DatasetVersion, member_dave: User
) -> None:
    report = services.report_generate(context=decided_context(audit, dataset_version, [member_dave]))
    path = report.revisions.get().path
    path.chmod(0o640)
    path.write_bytes(path.read_bytes() + b"\n% appended\n")
    with pytest.raises(services.ReportIntegrityError, match=r"differs from the [0-9a-f]{64} recorded for report"):
        services.report_sign_member(report=report, member=member_dave, password=PASSWORD)
    assert report.revisions.count() == 1


def test_private_keys_are_stored_encrypted_only(signed_report: SignedReport, settings: SettingsWrapper) -> None:
    rows: list[CertificateAuthority | SigningCertificate] = [
        *CertificateAuthority.objects.all(),
        *SigningCertificate.objects.all(),
    ]
    assert len(rows) == 4  # the authority, the organisation, two members
    for row in rows:
        assert row.encrypted_key_pem.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        assert "BEGIN PRIVATE KEY" not in row.encrypted_key_pem
        assert "BEGIN RSA PRIVATE KEY" not in row.encrypted_key_pem
        assert settings.REPORT_KEY_PASSPHRASE not in row.encrypted_key_pem


def test_a_changed_passphrase_is_named_instead_of_signing(
    signed_report: SignedReport, settings: SettingsWrapper, audit: PredictionAudit, member_dave: User
) -> None:
    settings.REPORT_KEY_PASSPHRASE = "a-different-passphrase-than-before"
    with pytest.raises(services.SigningKeyUnavailable, match="REPORT_KEY_PASSPHRASE does not open the key of"):
        services.report_generate(context=decided_context(audit, None, [member_dave]))


def test_rotation_certifies_new_reports_with_the_new_keys_and_old_ones_still_verify(
    signed_report: SignedReport, erin: User, audit: PredictionAudit, member_dave: User
) -> None:
    old_authority = CertificateAuthority.objects.get()
    new_authority = services.certificate_authority_create(actor=erin, reason="yearly rotation")
    assert Event.objects.filter(verb=Verb.CERTIFICATE_AUTHORITY_CREATED, actor=erin).exists()
    report = services.report_generate(context=decided_context(audit, None, [member_dave]))
    revision = services.report_sign_member(report=report, member=member_dave, password=PASSWORD)
    assert report.revisions.get(number=1).certificate.authority == new_authority
    assert revision.certificate.authority == new_authority
    # Both authorities stay trusted: the report made under the old one verifies, as does the new one.
    assert report_verify(data=signed_report.data).ok
    assert report_verify(data=revision.path.read_bytes()).ok
    assert CertificateAuthority.objects.filter(pk=old_authority.pk).exists()


def test_only_administrators_rotate_and_they_say_why(member_dave: User, erin: User) -> None:
    with pytest.raises(PermissionDenied):
        services.certificate_authority_create(actor=member_dave, reason="because")
    with pytest.raises(UserError, match="Say why"):
        services.organisation_certificate_create(actor=erin, reason="  ")
    assert not CertificateAuthority.objects.exists()


def test_the_organisation_key_rotates_under_the_same_authority(signed_report: SignedReport, erin: User) -> None:
    old = signed_report.revisions[0].certificate
    new = services.organisation_certificate_create(actor=erin, reason="key thought exposed")
    assert new.authority == old.authority
    assert new.pk != old.pk
    assert Event.objects.filter(verb=Verb.SIGNING_CERTIFICATE_ISSUED, data__reason="key thought exposed").exists()


def test_a_report_file_is_never_written_over(signed_report: SignedReport, settings: SettingsWrapper) -> None:
    data = signed_report.revisions[0].path.read_bytes()
    with pytest.raises(FileExistsError):
        services._store(data)
    assert Path(settings.REPORT_STORAGE_DIR, signed_report.revisions[0].file_name).read_bytes() == data


def test_a_key_that_does_not_belong_to_its_certificate_is_refused() -> None:
    # Keys open without OpenSSL's (slow) RSA validation: the pairing with the certificate is checked.
    now = timezone.now()
    key, certificate = signing.new_authority(common_name="Root 1", organisation="Org", now=now)
    other_key, _ = signing.new_authority(common_name="Root 2", organisation="Org", now=now)
    signing.Credentials(certificate=certificate, private_key=key, chain=(certificate,))
    with pytest.raises(ValueError, match="the private key does not belong to the certificate O=Org,CN=Root 1"):
        signing.Credentials(certificate=certificate, private_key=other_key, chain=(certificate,))
