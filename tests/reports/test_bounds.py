"""The bounds on verifying an uploaded PDF (reports/verification.py, docs/reports.md): caps on its
signatures and revisions checked before any signature, a time limit on the check, a throttle on the
page and the API; malformed fields answered as an invalid report, never a server error; and a changed
file reported as changed, without judging who signed it."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.reports.selectors import report_verify
from tests.factories import client_for
from tests.keys import KeyPool
from tests.reports import tampering
from tests.reports.helpers import SignedReport
from tests.reports.many_signatures import signed_many_times

pytestmark = pytest.mark.django_db


def _same_length(data: bytes, pattern: bytes, change: Callable[[re.Match[bytes]], bytes]) -> bytes:
    """``data`` with the first match of ``pattern`` replaced by ``change``'s bytes of the same length,
    so that every offset in the file (the cross-reference tables, the other signatures' byte ranges)
    stays where it was."""
    match = re.search(pattern, data)
    assert match is not None, pattern
    replacement = change(match)
    assert len(replacement) == len(match.group(0))
    return data[: match.start()] + replacement + data[match.end() :]


def _bad_date(data: bytes) -> bytes:
    # The organisation's signing time, "(D:2026...Z)" with the colon escaped, becomes month 99.
    return _same_length(data, rb"/M \(D\\072\d{14}Z\)", lambda m: m.group(0)[:9] + b"99999999999999Z)")


def _short_byte_range(data: bytes) -> bytes:
    # Three numbers where four belong.
    return _same_length(
        data,
        rb"/ByteRange \[(\d+) (\d+) (\d+) (\d+)\]",
        lambda m: re.sub(rb" \d+\]$", lambda t: b" " * (len(t.group(0)) - 1) + b"]", m.group(0)),
    )


def _named_byte_range(data: bytes) -> bytes:
    # A name where an offset belongs.
    return _same_length(
        data,
        rb"/ByteRange \[(\d+) (\d+) (\d+) (\d+)\]",
        lambda m: m.group(0).replace(m.group(3), b"/" + b"X" * (len(m.group(3)) - 1), 1),
    )


MALFORMED = {
    "month 99 in /M": (_bad_date, "its signing time (/M) is not a valid PDF date"),
    "three numbers in /ByteRange": (_short_byte_range, "its /ByteRange is not four whole numbers"),
    "a name in /ByteRange": (_named_byte_range, "its /ByteRange is not four whole numbers"),
}


def _upload(data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile("report.pdf", data, "application/pdf")


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_malformed_field_is_an_invalid_report_on_the_api_the_page_and_the_command(
    kind: str, signed_report: SignedReport, member_dave: User, tmp_path: Path
) -> None:
    mutate, problem = MALFORMED[kind]
    data = mutate(signed_report.data)
    assert len(data) == len(signed_report.data)
    client = client_for(member_dave)
    response = client.post(reverse("api-report-verify"), {"file": _upload(data)})
    assert response.status_code == 200, response.content[:300]
    body = response.json()
    assert body["ok"] is False
    organisation = body["signatures"][0]
    assert organisation["field"] == "Organisation"
    assert organisation["ok"] is False
    assert any(problem in item for item in organisation["problems"]), organisation["problems"]
    page = client.post(reverse("reports:verify"), {"file": _upload(data)})
    assert page.status_code == 200
    assert 'id="result-verdict">FAILED<' in page.content.decode()
    assert problem in page.content.decode()
    path = tmp_path / "report.pdf"
    path.write_bytes(data)
    out = io.StringIO()
    with pytest.raises(CommandError, match="verification failed"):
        call_command("verify_report", str(path), stdout=out)
    assert problem in out.getvalue()


def test_a_changed_byte_is_reported_as_a_change_not_as_an_untrusted_signer(signed_report: SignedReport) -> None:
    result = report_verify(data=tampering.flip_byte(signed_report.data))
    assert result.pdf.error is None
    for check in result.pdf.signatures:
        assert check.intact is False
        assert check.trusted is None
        assert check.problems == (
            "the signed bytes were changed: the document was modified after this signature was made (digest mismatch)",
        )
    assert not any("does not chain" in problem for problem in result.problems)


def test_a_byte_changed_under_the_last_signature_only_leaves_the_earlier_ones_trusted(
    signed_report: SignedReport,
) -> None:
    # The last member's signature dictionary is in the last revision, which no other signature covers.
    data = signed_report.data
    position = data.rindex(b"/Reason (Signed as ") + len(b"/Reason (")
    changed = bytearray(data)
    changed[position] ^= 0x01  # "Signed" becomes "Rigned"
    result = report_verify(data=bytes(changed))
    organisation, first, last = result.pdf.signatures
    assert (last.field, last.intact, last.trusted) == ("Member2", False, None)
    assert "digest mismatch" in last.problems[0]
    assert (organisation.intact, organisation.trusted) == (True, True)
    assert (first.intact, first.trusted) == (True, True)


def test_more_signatures_than_the_cap_are_refused_before_any_is_checked(
    key_pool: KeyPool, settings: SettingsWrapper, member_dave: User
) -> None:
    settings.REPORT_VERIFY_MAX_SIGNATURES = 4
    data = signed_many_times(5, key=key_pool.take)
    result = report_verify(data=data)
    assert result.pdf.signatures == ()
    assert result.pdf.error == (
        "the file has 5 signatures, more than the 4 a report of this portal can have "
        "(REPORT_VERIFY_MAX_SIGNATURES): not a valid report, not checked"
    )
    body = client_for(member_dave).post(reverse("api-report-verify"), {"file": _upload(data)}).json()
    assert body["ok"] is False
    assert body["error"] == result.pdf.error
    assert body["signatures"] == []


def test_more_revisions_than_the_cap_are_refused(signed_report: SignedReport, settings: SettingsWrapper) -> None:
    # The report: the rendered file, the certification and two signatures.
    settings.REPORT_VERIFY_MAX_REVISIONS = 3
    result = report_verify(data=signed_report.data)
    assert result.pdf.error is not None
    assert result.pdf.error.startswith("the file has 4 revisions (incremental updates), more than the 3")
    settings.REPORT_VERIFY_MAX_REVISIONS = 4
    assert report_verify(data=signed_report.data).ok


@pytest.mark.slow  # about 5 s: 40 signatures to make, and a second of checking before the limit stops it
def test_a_check_past_its_time_limit_is_stopped_and_answered(
    key_pool: KeyPool, settings: SettingsWrapper, member_dave: User
) -> None:
    settings.REPORT_VERIFY_CPU_SECONDS = 1
    settings.REPORT_VERIFY_MAX_SIGNATURES = settings.REPORT_VERIFY_MAX_REVISIONS = 100
    data = signed_many_times(40, key=key_pool.take)
    response = client_for(member_dave).post(reverse("api-report-verify"), {"file": _upload(data)})
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is False
    assert body["error"].startswith("verification took too long: checking the file took longer than the 1 s allowed")


def test_verifying_is_throttled_per_member_on_the_page_and_the_api_together(
    settings: SettingsWrapper, member_dave: User, member_fay: User
) -> None:
    settings.REPORT_VERIFY_PER_HOUR = 2
    cache.clear()
    dave = client_for(member_dave)
    assert dave.post(reverse("api-report-verify"), {"file": _upload(b"hello")}).status_code == 200
    assert dave.post(reverse("reports:verify"), {"file": _upload(b"hello")}).status_code == 200
    refused = dave.post(reverse("api-report-verify"), {"file": _upload(b"hello")})
    assert refused.status_code == 429
    assert "Expected available in" in refused.json()["detail"]
    page = dave.post(reverse("reports:verify"), {"file": _upload(b"hello")})
    assert page.status_code == 429
    assert "You have verified 2 files in the last hour, the most allowed (REPORT_VERIFY_PER_HOUR)" in (
        page.content.decode()
    )
    # Another member has their own count.
    assert client_for(member_fay).post(reverse("api-report-verify"), {"file": _upload(b"hello")}).status_code == 200
    cache.clear()


def test_the_verify_page_says_how_many_files_a_member_may_verify_an_hour_before_they_hit_the_limit(
    settings: SettingsWrapper, member_dave: User
) -> None:
    settings.REPORT_VERIFY_PER_HOUR = 7
    page = client_for(member_dave).get(reverse("reports:verify"))
    assert page.status_code == 200
    assert "You may verify 7 files an hour (here and through the API together)." in page.content.decode()
