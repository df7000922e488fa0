"""What-if thresholds in the portal: start from an upload, judge at thresholds through the API and the
page, freeze into a real audit; bad input named (docs/whatif.md)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.audits import services
from auditportal.audits.models import PredictionAudit, QueuedStatus, WhatIf
from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.statistics import whatif
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.fairness.statistics.whatif import Thresholds
from auditportal.outbox.models import OutboxMessage
from tests.audits.conftest import PREDICTIONS_CSV
from tests.factories import client_for


def _upload(content: str = PREDICTIONS_CSV) -> SimpleUploadedFile:
    return SimpleUploadedFile("scores.csv", content.encode(), content_type="text/csv")


def _fields(**changes: Any) -> dict[str, Any]:
    return {
        "file": _upload(),
        "label": "label",
        "positive": "1",
        "score": "score",
        "threshold": "0.5",
        "attributes": "gender, age_group",
        **changes,
    }


@pytest.fixture
def item(bob: User, predictions_csv: Path, dataset_storage: Path) -> WhatIf:
    return services.whatif_start(
        user=bob,
        source=predictions_csv,
        original_name="scores.csv",
        spec=AuditSpec(label="label", score="score", threshold=0.5, attributes=("gender", "age_group")),
    )


def test_a_small_file_is_prepared_at_once_its_scores_stored_and_hashed(item: WhatIf) -> None:
    item.refresh_from_db()
    assert item.status == QueuedStatus.DONE
    assert item.num_rows == 12
    assert len(item.sha256) == 64
    assert len(item.prepared_sha256) == 64
    assert item.scores_file.is_file()
    event = Event.objects.get(verb=Verb.WHATIF_STARTED)
    assert event.target_id == str(item.pk)
    assert event.data["prepared_sha256"] == item.prepared_sha256


def test_the_stored_hash_is_the_sha256_of_the_scores_file_on_disk(item: WhatIf, predictions_csv: Path) -> None:
    item.refresh_from_db()
    on_disk = item.scores_file.read_bytes()
    assert item.prepared_sha256 == hashlib.sha256(on_disk).hexdigest()
    # The file is numpy.save's of the prepared scores, as a fresh prepare of the same file gives them.
    spec = AuditSpec(label="label", score="score", threshold=0.5, attributes=("gender", "age_group"))
    prepared = whatif.prepare(predictions_csv, spec, display_name="scores.csv", max_bytes=1 << 30)
    saved = io.BytesIO()
    np.save(saved, prepared.scores, allow_pickle=False)
    assert on_disk == saved.getvalue()


def test_the_api_answers_every_metric_verdict_and_the_accuracy_at_the_thresholds_asked(
    item: WhatIf, carol: User
) -> None:
    client = client_for(carol)  # every member reads a what-if, as an audit
    url = reverse("api-whatif", args=[item.pk])
    at_start = client.get(url).json()
    assert at_start["exploratory"] is True
    assert at_start["thresholds"] == {"threshold": 0.5, "attribute": None, "groups": {}}
    moved = client.get(url, {"threshold": "0.5", "threshold[gender=f]": "0.42"}).json()
    assert moved["thresholds"]["groups"] == {"f": 0.42}
    f_before = at_start["document"]["attributes"]["gender"]["groups"]["f"]
    f_after = moved["document"]["attributes"]["gender"]["groups"]["f"]
    assert (f_before["tp"], f_after["tp"]) == (1, 2)  # f's positives score 0.91, 0.45 and 0.40
    assert moved["accuracy"]["groups"]["gender"]["f"] == (f_after["tp"] + f_after["tn"]) / f_after["n"]
    assert moved["document"]["prediction"]["thresholds"]["groups"] == {"f": 0.42}


@pytest.mark.parametrize(
    ("query", "field", "words"),
    [
        ({"threshold": "high"}, "threshold", "'high' is not a number"),
        ({"threshold": "inf"}, "threshold", "must be a finite number"),
        ({"threshold[gender=q]": "0.4"}, "threshold[gender=q]", "'q' is not a group of 'gender'"),
        ({"threshold[income=low]": "0.4"}, "threshold[income=low]", "'income' is not an attribute"),
        (
            {"threshold[gender=f]": "0.4", "threshold[age_group=old]": "0.4"},
            "threshold[age_group=old]",
            "one attribute at a time",
        ),
    ],
)
def test_a_bad_threshold_is_a_400_naming_the_parameter(
    item: WhatIf, bob: User, query: dict[str, str], field: str, words: str
) -> None:
    response = client_for(bob).get(reverse("api-whatif", args=[item.pk]), query)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert words in response.json()["detail"]


def test_a_file_without_a_score_column_is_refused_naming_the_score_field(bob: User, dataset_storage: Path) -> None:
    response = client_for(bob).post(reverse("api-whatif-list"), _fields(score="", prediction="pred"))
    assert response.status_code == 400
    assert response.json()["field"] == "score"
    assert "a what-if needs a score column" in response.json()["detail"]
    assert not WhatIf.objects.exists()


def test_the_api_starts_a_what_if_from_an_upload(bob: User, dataset_storage: Path) -> None:
    response = client_for(bob).post(reverse("api-whatif-list"), _fields())
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "done"
    assert body["num_rows"] == 12
    assert body["attributes"]["gender"] == ["f", "m"]


def test_a_large_file_goes_to_the_worker(bob: User, dataset_storage: Path, settings: SettingsWrapper) -> None:
    settings.AUDIT_INLINE_MAX_BYTES = 10
    response = client_for(bob).post(reverse("api-whatif-list"), _fields())
    assert response.status_code == 202
    item = WhatIf.objects.get()
    assert item.status == QueuedStatus.QUEUED
    assert item.upload_file.is_file()
    assert OutboxMessage.objects.get().name == "audits.prepare_whatif"
    assert services.whatif_prepare_queued(whatif_id=item.pk) is not None
    item.refresh_from_db()
    assert item.status == QueuedStatus.DONE
    assert not item.upload_path
    assert item.prepared_sha256 == hashlib.sha256(item.scores_file.read_bytes()).hexdigest()
    assert client_for(bob).get(reverse("api-whatif", args=[item.pk])).json()["document"]["rows"] == 12


def test_freezing_makes_a_real_audit_and_verdict_document_with_the_thresholds_and_both_hashes(
    item: WhatIf, bob: User
) -> None:
    response = client_for(bob).post(
        reverse("api-whatif-freeze", args=[item.pk]) + "?threshold=0.5&threshold%5Bgender%3Df%5D=0.42"
    )
    assert response.status_code == 201, response.json()
    audit = PredictionAudit.objects.get()
    assert audit.sha256 == item.sha256
    assert audit.parameters["thresholds"] == {"threshold": 0.5, "attribute": "gender", "groups": {"f": 0.42}}
    assert audit.parameters["whatif"] == {"id": item.pk, "prepared_sha256": item.prepared_sha256}
    assert audit.result["prediction"]["thresholds"]["groups"] == {"f": 0.42}
    assert audit.result["attributes"]["gender"]["groups"]["f"]["tp"] == 2
    document = VerdictDocument.objects.get(prediction_audit=audit)
    assert json.loads(document.canonical)["audit"]["prediction"]["whatif"]["prepared_sha256"] == item.prepared_sha256
    assert Event.objects.filter(verb=Verb.WHATIF_FROZEN, target_id=str(item.pk)).exists()
    assert response.json()["id"] == audit.pk


def test_freezing_refuses_stored_scores_that_no_longer_match_their_hash(item: WhatIf, bob: User) -> None:
    item.scores_file.write_bytes(item.scores_file.read_bytes()[:-8] + b"\0" * 8)
    response = client_for(bob).post(reverse("api-whatif-freeze", args=[item.pk]))
    assert response.status_code == 400
    assert "no longer match their SHA-256" in response.json()["detail"]
    assert not PredictionAudit.objects.exists()


def test_only_auditors_freeze(item: WhatIf, dave: User) -> None:
    response = client_for(dave).post(reverse("api-whatif-freeze", args=[item.pk]))
    assert response.status_code == 403
    assert not PredictionAudit.objects.exists()


def test_an_outsider_learns_of_no_what_if(item: WhatIf, oscar: User) -> None:
    assert client_for(oscar).get(reverse("api-whatif", args=[item.pk])).status_code == 404
    assert client_for(oscar).get(reverse("audits:whatif", args=[item.pk])).status_code == 404


def test_the_suggestion_says_its_thresholds_and_cost(item: WhatIf, bob: User) -> None:
    body = client_for(bob).get(reverse("api-whatif-suggestion", args=[item.pk]), {"attribute": "gender"}).json()
    assert body["attribute"] == "gender"
    assert set(body["thresholds"]["groups"]) == {"f", "m"}
    assert body["accuracy_cost"] == pytest.approx(body["accuracy_before"] - body["accuracy_after"])


def test_the_suggestion_is_offered_for_the_intersection_and_names_its_small_groups(
    bob: User, carol: User, predictions_csv: Path, dataset_storage: Path
) -> None:
    crossed = services.whatif_start(
        user=bob,
        source=predictions_csv,
        original_name="scores.csv",
        spec=AuditSpec(label="label", score="score", threshold=0.5, attributes=("gender", "age_group"), intersect=True),
    )
    client = client_for(carol)
    body = client.get(reverse("api-whatif-suggestion", args=[crossed.pk]), {"attribute": "gender&age_group"}).json()
    groups = ["f&old", "f&young", "m&old", "m&young"]
    assert body["attribute"] == "gender&age_group"
    assert list(body["tpr"]) == groups
    assert set(body["thresholds"]["groups"]) == set(groups)
    # One or two positives each: a TPR that moves in steps of 1/2 or 1, far wider than the tolerance.
    assert body["coarse"] == groups
    assert body["kept"] == []
    assert body["reached"] is True
    page = client.get(reverse("audits:whatif", args=[crossed.pk]), {"attribute": "gender&age_group"})
    html = page.content.decode()
    assert 'id="whatif-intersection-note"' in html
    assert "?attribute=gender%26age_group" in html
    assert html.count('class="threshold-row" data-group=') == 4  # the combinations with rows


def test_the_page_shows_the_exploratory_label_and_the_results_at_the_thresholds_in_the_address(
    item: WhatIf, bob: User
) -> None:
    response = client_for(bob).get(reverse("audits:whatif", args=[item.pk]), {"threshold[gender=f]": "0.42"})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="exploratory">Exploratory' in html
    assert 'name="threshold[gender=f]" step="any" placeholder="global" value="0.42"' in html
    assert '<input type="hidden" name="threshold[gender=f]" value="0.42">' in html
    assert "Freeze as an audit" in html


def test_the_page_form_freezes_and_lands_on_the_audit(item: WhatIf, bob: User) -> None:
    response = client_for(bob).post(
        reverse("audits:whatif-freeze", args=[item.pk]), {"threshold": "0.5", "threshold[gender=m]": "0.6"}
    )
    audit = PredictionAudit.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("audits:prediction", args=[audit.pk])
    assert audit.parameters["thresholds"]["groups"] == {"m": 0.6}


def test_the_page_form_names_a_missing_score_column(bob: User, dataset_storage: Path) -> None:
    response = client_for(bob).post(reverse("audits:whatif-new"), _fields(score=""))
    assert response.status_code == 400
    assert "a what-if needs a score column" in response.content.decode()


def test_thresholds_from_the_service_are_checked_too(item: WhatIf, bob: User) -> None:
    from auditportal.fairness.statistics.whatif import ThresholdError

    with pytest.raises(ThresholdError):
        services.whatif_freeze(user=bob, item=item, thresholds=Thresholds(0.5, "gender", {"nobody": 0.1}))
