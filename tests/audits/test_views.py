from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.audits import rules, services
from auditportal.audits.models import PredictionAudit
from auditportal.fairness.documents.plain import document_plain_summary
from auditportal.fairness.files.tabular import read
from auditportal.fairness.statistics.audit import AuditSpec
from tests.audits.conftest import PREDICTIONS_CSV
from tests.factories import PredictionAuditFactory, client_for
from tests.policies.helpers import judge_every_metric


def _upload(name: str = "scores.csv", content: str = PREDICTIONS_CSV) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content.encode(), content_type="text/csv")


def _form(**changes: Any) -> dict[str, Any]:
    return {
        "file": _upload(),
        "label": "label",
        "positive": "1",
        "prediction": "pred",
        "score": "",
        "attributes": "gender, age_group",
        "unknown_tokens": "nan, -1, unknown",
        **changes,
    }


@pytest.fixture
def audit(bob: User, dataset_storage: Path) -> PredictionAudit:
    return PredictionAuditFactory.create(created_by=bob)


# --------------------------------------------------------------------------- service


def test_an_audit_is_stored_with_its_hash_parameters_result_and_an_activity_event(audit: PredictionAudit) -> None:
    audit.refresh_from_db()
    assert audit.num_rows == 12
    assert len(audit.sha256) == 64
    assert audit.parameters["prediction"] == "pred"
    assert audit.result["file"]["sha256"] == audit.sha256
    assert audit.result["attributes"]["gender"]["unknown"] == 2
    assert audit.verdict == "INCONCLUSIVE"
    event = Event.objects.get(verb="prediction_audit.created")
    assert event.target_id == str(audit.pk)
    assert event.actor is not None
    assert event.actor.username == "bob"
    assert event.data["sha256"] == audit.sha256


def test_a_file_given_by_path_is_hashed_as_it_is_read(bob: User, predictions_csv: Path, dataset_storage: Path) -> None:
    audit = services.prediction_audit_run(
        user=bob,
        source=predictions_csv,
        original_name="scores.csv",
        spec=AuditSpec(label="label", prediction="pred", attributes=("gender",)),
    )
    assert audit.sha256 == hashlib.sha256(predictions_csv.read_bytes()).hexdigest()


@pytest.mark.parametrize("route", ["form", "api"])
def test_an_upload_is_hashed_as_it_streams_in_and_not_read_again_for_its_hash(
    route: str, bob: User, dataset_storage: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Several of the upload handlers' 64 KiB chunks, so the digest must carry across chunks.
    body = PREDICTIONS_CSV.splitlines(keepends=True)
    content = "".join([body[0], *(body[1:] * 1500)])
    assert len(content.encode()) > 4 * 64 * 1024

    def no_second_read(*args: object) -> str:
        raise AssertionError("an uploaded file was read again to hash it")

    monkeypatch.setattr(read, "sha256_of", no_second_read)
    upload = _upload(content=content)
    client = client_for(bob)
    if route == "form":
        response = client.post(reverse("audits:prediction-new"), _form(file=upload, attributes="gender"))
        assert response.status_code == 302, response.content.decode()
    else:
        data = {"file": upload, "label": "label", "prediction": "pred", "attributes": ["gender"]}
        response = client.post("/api/v1/audits/predictions/", data)
        assert response.status_code == 201, response.content.decode()
    audit = PredictionAudit.objects.get()
    assert audit.num_rows == 12 * 1500
    assert audit.sha256 == hashlib.sha256(content.encode()).hexdigest()
    assert audit.result["file"]["sha256"] == audit.sha256


@pytest.mark.django_db  # the member comes from a fixture fetched by name
@pytest.mark.parametrize("fixture_name", ["alice", "dave", "erin", "oscar"])
def test_only_ml_engineers_and_reviewers_may_run_an_audit(
    request: pytest.FixtureRequest, fixture_name: str, predictions_csv: Path
) -> None:
    user = request.getfixturevalue(fixture_name)
    with pytest.raises(rules.AuditorRequired, match="Only an ML engineer or a reviewer can run prediction audits"):
        services.prediction_audit_run(
            user=user,
            source=predictions_csv,
            original_name="scores.csv",
            spec=AuditSpec(label="label", prediction="pred", attributes=("gender",)),
        )
    assert not PredictionAudit.objects.exists()


# --------------------------------------------------------------------------- web


@pytest.mark.django_db  # the member comes from a fixture fetched by name
@pytest.mark.parametrize("fixture_name", ["bob", "carol"])
def test_ml_engineers_and_reviewers_audit_through_the_form_and_see_the_verdicts(
    request: pytest.FixtureRequest, fixture_name: str, dataset_storage: Path
) -> None:
    client = client_for(request.getfixturevalue(fixture_name))
    assert client.get(reverse("audits:prediction-new")).status_code == 200
    response = client.post(reverse("audits:prediction-new"), _form(intersect="on"))
    audit = PredictionAudit.objects.get()
    assert response.status_code == 302, response.content.decode()
    assert response["Location"] == reverse("audits:prediction", args=[audit.pk])
    assert audit.original_name == "scores.csv"
    assert audit.parameters["attributes"] == ["gender", "age_group"]
    assert list(audit.result["attributes"]) == ["gender", "age_group", "gender&age_group"]

    page = client.get(response["Location"]).content.decode()
    assert audit.sha256 in page
    assert 'data-attribute="gender&amp;age_group"' in page
    assert '<span class="badge verdict-INCONCLUSIVE">INCONCLUSIVE</span>' in page
    assert 'data-metric="equalized_odds" data-group="m"' in page
    assert "2 rows with an unknown value excluded" in page
    # The uploaded file is not kept anywhere.
    assert not dataset_storage.exists() or not any(p.is_file() for p in dataset_storage.rglob("*"))


@pytest.mark.django_db  # the member comes from a fixture fetched by name
@pytest.mark.parametrize("fixture_name", ["alice", "dave"])
def test_other_members_get_403_on_the_audit_form(request: pytest.FixtureRequest, fixture_name: str) -> None:
    client = client_for(request.getfixturevalue(fixture_name))
    response = client.get(reverse("audits:prediction-new"))
    assert response.status_code == 403
    assert b"Only an ML engineer or a reviewer can run prediction audits." in response.content
    assert client.post(reverse("audits:prediction-new"), _form()).status_code == 403
    assert not PredictionAudit.objects.exists()


def test_a_file_error_is_shown_on_the_form_with_file_row_and_column(bob: User, dataset_storage: Path) -> None:
    upload = _upload(content="label,pred,gender\n1,1,f\n0,0,m\n1,7,f\n")
    response = client_for(bob).post(reverse("audits:prediction-new"), _form(file=upload, attributes="gender"))
    assert response.status_code == 400
    assert "scores.csv, row 3, column &#x27;pred&#x27;: value 7 is not a 0/1 prediction" in response.content.decode()
    assert not PredictionAudit.objects.exists()


def test_a_score_without_threshold_is_shown_on_the_threshold_field(bob: User, dataset_storage: Path) -> None:
    response = client_for(bob).post(reverse("audits:prediction-new"), _form(prediction="", score="score"))
    assert response.status_code == 400
    assert response.context["form"].errors["threshold"] == [
        "a score column needs a threshold: rows whose score is at least the threshold are predicted positive"
    ]
    assert "a score column needs a threshold" in response.content.decode()


def test_an_oversized_upload_is_refused_and_nothing_is_kept(
    bob: User, dataset_storage: Path, settings: SettingsWrapper
) -> None:
    settings.DATASET_MAX_UPLOAD_BYTES = 100
    response = client_for(bob).post(reverse("audits:prediction-new"), _form())
    assert response.status_code == 400
    assert "scores.csv: the file is larger than the 100 bytes limit" in response.content.decode()
    assert not any(Path(settings.FILE_UPLOAD_TEMP_DIR).iterdir())


def test_every_member_reads_audits_and_outsiders_see_none(
    audit: PredictionAudit, dave: User, oscar: User, alice: User
) -> None:
    for member in (dave, alice):
        client = client_for(member)
        assert b"scores.csv" in client.get(reverse("audits:predictions")).content
        assert client.get(reverse("audits:prediction", args=[audit.pk])).status_code == 200
    outsider = client_for(oscar)
    listing = outsider.get(reverse("audits:predictions"))
    assert b"scores.csv" not in listing.content
    assert b"Your account has no role yet" in listing.content
    assert outsider.get(reverse("audits:prediction", args=[audit.pk])).status_code == 404


def test_the_list_offers_the_form_only_to_those_who_may_run_audits(
    audit: PredictionAudit, dave: User, bob: User
) -> None:
    new = reverse("audits:prediction-new").encode()
    assert new not in client_for(dave).get(reverse("audits:predictions")).content
    assert new in client_for(bob).get(reverse("audits:predictions")).content


def _rows(gender: str, tp: int, fn: int, fp: int, tn: int) -> str:
    cells = [("1,1", tp), ("1,0", fn), ("0,1", fp), ("0,0", tn)]
    return "".join(f"{label_pred},{gender}\n" * n for label_pred, n in cells)


def test_the_page_shows_the_planning_gap_and_a_gap_too_close_to_delta_as_not_decidable(
    bob: User, dataset_storage: Path
) -> None:
    # TPR 0.749 on 4,000 positives against 0.80 on 20,000: 0.001 beyond delta. The data at hand would
    # already decide a gap of 0.075, and the observed one would take some 430 times the data: no plan.
    content = "label,pred,gender\n" + _rows("a", 16_000, 4_000, 500, 4_500) + _rows("b", 2_996, 1_004, 100, 900)
    audit = PredictionAuditFactory.create(
        created_by=bob, content=content, spec=AuditSpec(label="label", prediction="pred", attributes=("gender",))
    )
    tpr = next(c for c in audit.result["attributes"]["gender"]["comparisons"] if c["metric"] == "tpr")
    assert (tpr["verdict"], tpr["positives_needed"], tpr["needed_decidable"]) == ("INCONCLUSIVE", None, False)
    page = client_for(bob).get(reverse("audits:prediction", args=[audit.pk])).content.decode()
    row = page[page.index('data-metric="tpr" data-group="b"') :]
    row = row[: row.index("</tr>")]
    assert '<em class="muted">not decidable</em><br><small class="muted wrap">towards FAIL at -0.0750</small>' in row
    # The note is on a row of its own beneath the comparison.
    note = page[page.index('data-note-metric="tpr" data-note-group="b"') :]
    note = note[: note.index("</tr>")]
    assert "the data at hand would already decide a gap of -0.075 with power 0.8" in note


def test_the_list_is_paged_newest_first(audit: PredictionAudit, dave: User) -> None:
    from auditportal.audits.views import AUDITS_PER_PAGE

    for index in range(AUDITS_PER_PAGE):
        PredictionAuditFactory.create(created_by=audit.created_by, original_name=f"copy-{index}.csv")
    client = client_for(dave)
    first = client.get(reverse("audits:predictions")).content.decode()
    assert first.count('<td><a href="/audits/predictions/') == AUDITS_PER_PAGE
    assert "copy-0.csv" in first  # the copies are newer than the fixture's audit
    assert "scores.csv" not in first
    assert first.index(f"copy-{AUDITS_PER_PAGE - 1}.csv") < first.index("copy-0.csv")  # newest first
    assert f"Page 1 of 2 (1–{AUDITS_PER_PAGE} of {AUDITS_PER_PAGE + 1})" in first
    last = client.get(reverse("audits:predictions"), {"page": 2}).content.decode()
    assert last.count('<td><a href="/audits/predictions/') == 1
    assert "copy-" not in last
    assert "scores.csv" in last
    assert 'rel="prev"' in last
    assert 'rel="next"' not in last
    # Out of range shows the last page; not a number, the first.
    assert "scores.csv" in client.get(reverse("audits:predictions"), {"page": 99}).content.decode()
    assert "Page 1 of 2" in client.get(reverse("audits:predictions"), {"page": "x"}).content.decode()


# --------------------------------------------------------------------------- API


def test_the_api_runs_an_audit_and_returns_the_document_with_its_id(carol: User, dataset_storage: Path) -> None:
    response = client_for(carol).post(
        "/api/v1/audits/predictions/",
        {
            "file": _upload(),
            "label": "label",
            "score": "score",
            "threshold": "0.5",
            "attributes": ["gender", "age_group"],
            "references": ["gender=m"],
        },
    )
    assert response.status_code == 201, response.content.decode()
    body = response.json()
    audit = PredictionAudit.objects.get()
    assert body["id"] == audit.pk
    assert body["rows"] == 12
    assert (body["tolerance"], body["alpha"]) == (0.05, 0.05)
    assert audit.policy is not None
    assert body["policy"]["version"] == 1 == audit.policy.version
    assert body["attributes"]["gender"]["reference"] == "m"
    assert body["prediction"]["threshold"] == 0.5
    assert audit.created_by == carol


def test_the_api_reports_file_errors_with_file_row_and_column(bob: User, dataset_storage: Path) -> None:
    response = client_for(bob).post(
        "/api/v1/audits/predictions/",
        {"file": _upload(content=""), "label": "label", "prediction": "pred", "attributes": ["gender"]},
    )
    assert response.status_code == 400
    assert response.json() == {
        "detail": "scores.csv: the file is empty (0 bytes); upload a file with a header line and data rows",
        "field": None,
        "file": "scores.csv",
        "row": None,
        "column": None,
    }


def test_the_api_refuses_a_score_without_threshold_and_other_roles(
    bob: User, dave: User, dataset_storage: Path
) -> None:
    data = {"file": _upload(), "label": "label", "score": "score", "attributes": ["gender"]}
    response = client_for(bob).post("/api/v1/audits/predictions/", data)
    assert response.status_code == 400
    assert response.json() == {
        "detail": "a score column needs a threshold: rows whose score is at least the threshold are predicted positive",
        "field": "threshold",
    }
    data["file"] = _upload()
    assert client_for(dave).post("/api/v1/audits/predictions/", data).status_code == 403
    assert not PredictionAudit.objects.exists()


def test_the_api_returns_the_stored_document_to_members_only(audit: PredictionAudit, dave: User, oscar: User) -> None:
    detail = client_for(dave).get(f"/api/v1/audits/predictions/{audit.pk}/")
    assert detail.status_code == 200
    assert detail.json()["attributes"] == audit.result["attributes"]
    assert detail.json()["id"] == audit.pk
    listing = client_for(dave).get("/api/v1/audits/predictions/").json()
    assert [item["id"] for item in listing["results"]] == [audit.pk]
    assert listing["results"][0]["verdict"] == "INCONCLUSIVE"
    assert client_for(oscar).get(f"/api/v1/audits/predictions/{audit.pk}/").status_code == 404
    assert client_for(oscar).get("/api/v1/audits/predictions/").json()["results"] == []


def _edge_csv() -> str:
    """TPR 0.705 against 0.80 on 1,000 positives each: the TPR family FAILs at 95%, the headline (under a policy
    judging all five metrics, 99% for this one) does not."""
    rows = ["label,pred,g"]
    for group, (tp, fn, fp, tn) in {"a": (800, 200, 100, 900), "b": (705, 295, 100, 900)}.items():
        rows += [f"1,1,{group}"] * tp + [f"1,0,{group}"] * fn + [f"0,1,{group}"] * fp + [f"0,0,{group}"] * tn
    return "\n".join(rows) + "\n"


def test_the_audit_page_shows_the_headline_verdict_and_the_level_of_every_verdict(
    bob: User, dataset_storage: Path
) -> None:
    judge_every_metric()  # five judged families (the default judges tpr only)
    audit = PredictionAuditFactory.create(
        created_by=bob, content=_edge_csv(), spec=AuditSpec(label="label", prediction="pred", attributes=("g",))
    )
    assert audit.verdict == audit.result["headline"]["verdict"] == "INCONCLUSIVE"
    page = client_for(bob).get(reverse("audits:prediction", args=[audit.pk])).content.decode()
    heading = page[page.index("<h1>") : page.index("</h1>")]
    assert '<span class="badge verdict-INCONCLUSIVE">INCONCLUSIVE</span>' in heading
    headline = page[page.index('<dd id="headline">') :]
    headline = headline[: headline.index("</dd>")]
    assert '<span class="badge verdict-INCONCLUSIVE">' in headline
    assert "Held at alpha 0.05 over all 5 judged families: a FAIL needs an interval at the family" in headline
    section = page[page.index('data-attribute="g"') :]
    assert '<h2><code>g</code> <span class="badge verdict-FAIL">FAIL</span>' in section
    assert (
        "Verdict: the worst of its metrics&#x27; verdicts; each metric&#x27;s comparisons are held at alpha within "
        "their family."
    ) in section
    assert "the verdicts rest on the intervals alone" in page


def test_an_audit_stored_before_the_headline_says_its_verdict_is_the_worst_over_the_families(
    bob: User, dataset_storage: Path
) -> None:
    audit = PredictionAuditFactory.create(created_by=bob)
    stored = {key: value for key, value in audit.result.items() if key not in ("headline", "levels")}
    PredictionAudit.objects.filter(pk=audit.pk).update(result={**stored, "schema_version": 1})
    page = client_for(bob).get(reverse("audits:prediction", args=[audit.pk])).content.decode()
    headline = page[page.index('<dd id="headline">') :]
    assert (
        "The worst of the families&#x27; verdicts, each held at alpha within its family, not over the audit"
        in (headline[: headline.index("</dd>")])
    )


def test_the_page_words_the_exact_interval_threshold_as_a_whole_count_of_what_it_counts(
    audit: PredictionAudit,
) -> None:
    # z**4 is 14.8 at 95%: a count is under it exactly when it is under 15, and it counts cases.
    page = client_for(audit.created_by).get(reverse("audits:prediction", args=[audit.pk])).content.decode()
    assert "fewer than 15 successes or fewer than 15 failures (for the TPR: true positives or false negatives)" in page
    assert "14.8" not in page


def test_the_page_writes_counts_with_thousands_separators(bob: User, dataset_storage: Path) -> None:
    rows = "".join(f"{i % 2},{(i // 2) % 2},0.5,{'f' if i % 3 else 'm'},young\n" for i in range(1234))
    audit = PredictionAuditFactory.create(created_by=bob, content="label,pred,score,gender,age_group\n" + rows)
    page = client_for(bob).get(reverse("audits:prediction", args=[audit.pk])).content.decode()
    assert "<dt>Rows</dt><dd>1,234</dd>" in page


HOSTILE = "<img src=x onerror=alert(1)>"


def test_the_page_opens_with_a_plain_language_paragraph_escaping_the_files_names(
    bob: User, dataset_storage: Path
) -> None:
    rows = ["1,1,0.5,m,young"] * 30 + ["1,0,0.5,m,young"] * 3 + ["0,0,0.5,m,young"] * 30
    rows += [f"1,1,0.5,{HOSTILE},young"] * 3 + [f"1,0,0.5,{HOSTILE},young"] * 3 + [f"0,0,0.5,{HOSTILE},old"] * 3
    audit = PredictionAuditFactory.create(
        created_by=bob, content="label,pred,score,gender,age_group\n" + "\n".join(rows) + "\n"
    )
    page = client_for(bob).get(reverse("audits:prediction", args=[audit.pk])).content.decode()
    summary = document_plain_summary(audit.result)
    assert "cannot be decided yet" in summary.undecided
    assert f"“{HOSTILE}” in “gender” would need about" in summary.undecided
    assert f"<p>{escape(summary.text)}</p>" in page
    assert HOSTILE not in page  # escaped wherever it appears
    # The paragraph comes first, the method's detail folded below the facts.
    assert page.index('id="plain-summary"') < page.index('<dl class="facts">') < page.index('<details class="method"')
    assert page.index('<details class="method"') < page.index("Differences are group minus reference.")
