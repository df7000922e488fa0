"""verify_audit_log holds the chain to heads recorded outside the log: the head each signed report
embeds, and signed head files (``manage.py audit_log_head export``, or the beat schedule). Deleting
the newest events leaves a chain that holds by itself; against these it fails."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.context import os_user
from auditportal.activity.models import Event, Verb
from auditportal.fairness.documents.canonical import canonical_json, canonical_sha256
from auditportal.reports import signing, tasks
from auditportal.reports.models import CertificateKind, Report, SigningCertificate
from tests.activity.chain_helpers import tamper, verify

FORGED = "f" * 64


@pytest.fixture(autouse=True)
def small_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """2048-bit keys, as the report tests make: the organisation key signs the head files."""
    monkeypatch.setattr(signing, "KEY_SIZE", 2048)


def failure(*args: str) -> str:
    with pytest.raises(CommandError) as caught:
        verify(*args)
    return str(caught.value)


def stored_report(event: Event, *, hash: str | None = None) -> Report:
    """A stored report's row as report_generate leaves it, as far as the verifier reads it: the
    context's canonical JSON, whose chain_head is the head when the decision was taken."""
    context = {"title": "Audit", "chain_head": {"seq": event.seq, "hash": hash or event.hash}}
    return Report.objects.create(
        title="Audit",
        subject_label="audit",
        context_json=canonical_json(context).decode(),
        context_sha256=canonical_sha256(context),
        pages=1,
    )


def delete_from(seq: int) -> None:
    tamper("DELETE FROM activity_event WHERE seq >= %s", [seq])


def export(path: Path, user: str = "erin") -> str:
    out = StringIO()
    call_command("audit_log_head", "export", "--out", str(path), "--user", user, stdout=out)
    return out.getvalue()


# --- the heads the reports embed -------------------------------------------------------------------


def test_deleting_the_newest_events_fails_against_a_reports_embedded_head(chain: list[Event]) -> None:
    report = stored_report(chain[-1])
    head = Event.objects.order_by("-seq").first()
    assert head is not None
    assert verify() == (
        f"The activity log verifies: {head.seq} events, head seq {head.seq}, hash {head.hash}.\n"
        f"It holds against 1 recorded heads (1 in reports, 0 in head files); the latest is seq {chain[-1].seq}, "
        f"from report #{report.pk}.\n"
    )
    delete_from(chain[-2].seq)
    assert failure() == (
        f"The chain of {chain[-3].seq} events holds, but not against 1 of the 1 heads recorded outside the log:\n"
        f"- report #{report.pk} recorded head seq {chain[-1].seq} (hash {chain[-1].hash}), but the chain ends at "
        f"seq {chain[-3].seq}: the events after it were deleted"
    )


def test_a_log_replaced_under_a_reports_head_fails(chain: list[Event]) -> None:
    report = stored_report(chain[2], hash=FORGED)
    assert failure().endswith(
        f"- report #{report.pk} recorded head seq {chain[2].seq} (hash {FORGED}), but the event at seq "
        f"{chain[2].seq} has hash {chain[2].hash}: the log was replaced"
    )


def test_an_emptied_log_fails_against_a_reports_head(chain: list[Event]) -> None:
    report = stored_report(chain[-1])
    tamper("DELETE FROM activity_event")
    assert failure().endswith(
        f"- report #{report.pk} recorded head seq {chain[-1].seq} (hash {chain[-1].hash}), but the log is empty: "
        "its events were deleted"
    )


def test_every_failing_report_is_counted(chain: list[Event]) -> None:
    for event in chain[1:]:
        stored_report(event)
    delete_from(chain[2].seq)
    message = failure()
    assert f"not against {len(chain) - 2} of the {len(chain) - 1} heads" in message
    assert "- and 0 more" not in message


# --- signed head files -----------------------------------------------------------------------------


def test_an_exported_head_anchors_the_log(chain: list[Event], tmp_path: Path) -> None:
    path = tmp_path / "head.json"
    out = export(path)
    # The export is recorded after the head it anchors, which follows the organisation key's events
    # (made on first use).
    recorded = Event.objects.order_by("-seq").first()
    assert recorded is not None
    assert recorded.verb == Verb.ACTIVITY_LOG_HEAD_EXPORTED
    head = Event.objects.get(seq=recorded.seq - 1)
    assert head.seq > chain[-1].seq
    certificate = SigningCertificate.objects.get(kind=CertificateKind.ORGANISATION)
    assert (recorded.actor_username, recorded.target_type, recorded.target_id) == (
        "erin",
        "reports.signingcertificate",
        str(certificate.pk),
    )
    assert recorded.data == {
        "seq": head.seq,
        "hash": head.hash,
        "file": "head.json",
        "cli": {"command": "audit_log_head", "os_user": os_user()},
    }
    assert out == f"Wrote {path}: head seq {head.seq}, hash {head.hash}.\n"
    written = json.loads(path.read_text())
    assert (written["head"]["seq"], written["head"]["hash"], written["head"]["exported_by"]) == (
        head.seq,
        head.hash,
        "erin",
    )
    assert "1 in head files" in verify("--anchor", str(path))
    delete_from(head.seq)
    message = failure("--anchor", str(path))
    assert f"- head file {path} (authority " in message
    assert f"recorded head seq {head.seq} (hash {head.hash}), but the chain ends at seq {head.seq - 1}" in message


def test_a_head_file_changed_after_signing_is_refused(chain: list[Event], tmp_path: Path) -> None:
    path = tmp_path / "head.json"
    export(path)
    written = json.loads(path.read_text())
    written["head"]["seq"] = chain[1].seq
    written["head"]["hash"] = chain[1].hash
    path.write_text(json.dumps(written))
    assert failure("--anchor", str(path)) == (
        f"head file {path}: the signature does not hold: the head was changed after it was signed."
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a head file (no head and signature objects)."),
        (b'{"head": {"kind": "x"}, "signature": {}}', "head.kind/version: expected auditportal.activity-log-head"),
    ],
)
def test_a_file_that_is_not_a_head_file_is_named(
    chain: list[Event], tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "head.json"
    path.write_bytes(content)
    assert failure("--anchor", str(path)).startswith(f"head file {path}: {problem}")


def test_only_an_administrator_exports_a_head(chain: list[Event], bob: User, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--user 'bob' does not hold the administrator role"):
        export(tmp_path / "head.json", user="bob")
    assert not (tmp_path / "head.json").exists()


def test_a_head_file_is_never_overwritten(chain: list[Event], tmp_path: Path) -> None:
    path = tmp_path / "head.json"
    path.write_text("kept")
    with pytest.raises(CommandError, match="the file exists; a head file is never overwritten"):
        export(path)
    assert path.read_text() == "kept"
    assert not Event.objects.filter(verb=Verb.ACTIVITY_LOG_HEAD_EXPORTED).exists()


def test_the_scheduled_export_anchors_the_log_by_default(
    chain: list[Event], tmp_path: Path, settings: SettingsWrapper
) -> None:
    settings.AUDIT_LOG_HEAD_DIR = tmp_path / "heads"
    written = Path(tasks.export_log_head_task())
    assert written.parent == tmp_path / "heads"
    assert tasks.export_log_head_task() == str(written)  # the same head is not written twice
    # Nor recorded: an event would be a new head for the next run to export.
    assert not Event.objects.filter(verb=Verb.ACTIVITY_LOG_HEAD_EXPORTED).exists()
    assert "1 in head files" in verify()
    delete_from(chain[-1].seq)
    assert f"- head file {written} (authority " in failure()
