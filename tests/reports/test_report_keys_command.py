from __future__ import annotations

import io

import pytest
from cryptography import x509
from django.core.management import CommandError, call_command

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.reports.models import CertificateAuthority, CertificateKind, SigningCertificate

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def administrator(erin: User) -> User:
    return erin


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("report_keys", *args, stdout=out)
    return out.getvalue()


def test_show_rotate_and_print_the_authorities() -> None:
    assert "No certificate authority yet" in _run("show")
    assert "New certificate authority #" in _run("rotate", "--authority", "--reason", "first setup", "--user", "erin")
    first = CertificateAuthority.objects.get()
    assert first.fingerprint in _run("show")
    assert "New organisation certificate #" in _run(
        "rotate", "--organisation", "--reason", "key exposed", "--user", "erin"
    )
    assert SigningCertificate.objects.filter(kind=CertificateKind.ORGANISATION, authority=first).count() == 2
    _run("rotate", "--authority", "--reason", "new root", "--user", "erin")
    second = CertificateAuthority.objects.order_by("-id").first()
    assert second is not None
    assert second.pk != first.pk
    pem = _run("pem")
    assert x509.load_pem_x509_certificate(pem.encode()).subject.rfc4514_string() == (
        x509.load_pem_x509_certificate(second.certificate_pem.encode()).subject.rfc4514_string()
    )
    assert _run("pem", "--id", str(first.pk)).strip() == first.certificate_pem.strip()
    # The command acts as the administrator named, whom the log names, with who ran it at the shell.
    events = Event.objects.filter(verb=Verb.CERTIFICATE_AUTHORITY_CREATED)
    assert set(events.values_list("actor_username", flat=True)) == {"erin"}
    assert {event.data["cli"]["command"] for event in events} == {"report_keys"}


def test_a_rotation_without_an_administrator_is_refused() -> None:
    with pytest.raises(CommandError, match=r"^--user is required: name the administrator acting"):
        _run("rotate", "--authority", "--reason", "first setup")
    assert not CertificateAuthority.objects.exists()


def test_a_rotation_without_a_reason_is_refused() -> None:
    with pytest.raises(CommandError, match="--reason: Say why"):
        _run("rotate", "--authority", "--reason", " ", "--user", "erin")
    assert not CertificateAuthority.objects.exists()
