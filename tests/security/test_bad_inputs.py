"""The corpus of bad inputs (tests/security/bad_inputs.py): each one, sent by a member holding every
role, gets its expected 4xx with a message that names what is wrong, and changes nothing: the same
number of rows in every table and the same files under the portal's writable directories."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DataError, connection, transaction
from django.db.models import CharField, Model
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import ApiToken, Role, User
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import ReviewRequest
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.models import VerdictDocument
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.experiments.models import Experiment
from auditportal.fairness.errors import UserError
from auditportal.lib.lengths import fit_column
from auditportal.monitoring import services as monitoring_services
from tests.experiments.conftest import demo_version
from tests.factories import PredictionAuditFactory, make_user
from tests.security.bad_inputs import CORPUS, BadInput, row_counts, written_files

__all__ = ["demo_version"]

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def test_the_corpus_holds_at_least_thirty_distinct_bad_inputs() -> None:
    assert len(CORPUS) >= 30
    assert len({case.id for case in CORPUS}) == len(CORPUS)


@pytest.fixture
def member(demo_version: DatasetVersion, settings: SettingsWrapper, tmp_path: Path) -> tuple[Client, dict[str, int]]:
    """A member holding every role, and the ids the corpus names: a dataset version, a prediction
    audit and its verdict document, a draft review request."""
    settings.EXPERIMENT_RUN_DIR = tmp_path / "runs"
    settings.REPORT_STORAGE_DIR = tmp_path / "reports"
    pat: User = make_user("pat", list(Role))
    audit = PredictionAuditFactory.create(created_by=pat)
    document = verdict_document_of_audit(audit=audit)
    draft = approval_services.review_request_create(
        user=pat,
        title="Vendor scoring model",
        intended_use="Ranking applications",
        documents=[document],
        model_identifier="vendor-score:2.1",
    )
    # The webhook inputs' deployment (an empty one).
    monitoring_services.deployment_create(user=pat, name="corpus/prod")
    client = Client()
    client.force_login(pat)
    return client, {
        "version_id": demo_version.pk,
        "audit_id": audit.pk,
        "document_id": document.pk,
        "request_id": draft.pk,
    }


def _fill(value: Any, ids: dict[str, int]) -> Any:
    """``value`` with every "{name}" placeholder replaced by the id (a whole placeholder by the int)."""
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            return ids[whole[1]]
        return _PLACEHOLDER.sub(lambda m: str(ids[m[1]]), value)
    if isinstance(value, dict):
        return {key: _fill(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, ids) for item in value]
    if isinstance(value, tuple):  # a file: (name, bytes)
        return SimpleUploadedFile(value[0], value[1])
    return value


def _send(client: Client, case: BadInput, ids: dict[str, int]) -> Any:
    path = _fill(case.path, ids)
    if case.form is not None:
        form = {key: _fill(value, ids) for key, value in case.form.items()}
        return client.post(path, form)
    if case.json is not None:
        return client.post(path, json.dumps(_fill(case.json, ids)), content_type="application/json")
    assert case.body is not None
    return client.post(path, case.body, content_type=case.content_type)


@pytest.mark.django_db
def test_every_bad_input_gets_its_4xx_and_message_and_changes_nothing(member: tuple[Client, dict[str, int]]) -> None:
    client, ids = member
    wrong = []
    for case in CORPUS:
        rows, files = row_counts(), written_files()
        response = _send(client, case, ids)
        text = html.unescape(response.content.decode("utf-8", "replace"))
        if response.status_code != case.status or case.message not in text:
            shown = " ".join(re.sub(r"<[^>]+>", " ", text).split())
            wrong.append(
                f"{case.id}: HTTP {response.status_code}, expected {case.status} and {case.message!r}: {shown[:400]}"
            )
        if row_counts() != rows:
            changed = {k: (rows.get(k), v) for k, v in row_counts().items() if rows.get(k) != v}
            wrong.append(f"{case.id}: rows changed {changed}")
        if written_files() != files:
            wrong.append(f"{case.id}: files changed {sorted(set(written_files()) ^ set(files))}")
    assert wrong == [], "\n".join(wrong)
    assert Experiment.objects.count() == 0
    assert ReviewRequest.objects.count() == 1
    assert VerdictDocument.objects.count() == 1


LENGTH_CHECKED = [(ReviewRequest, "title", "title"), (ApiToken, "name", "name"), (User, "username", "account")]


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="SQLite stores text longer than a column's max_length; only PostgreSQL refuses it (DataError)",
)
@pytest.mark.django_db
@pytest.mark.parametrize(("model", "column", "field"), LENGTH_CHECKED, ids=lambda v: getattr(v, "__name__", v))
def test_postgresql_refuses_what_fit_column_refuses_first(model: type[Model], column: str, field: str) -> None:
    model_field = model._meta.get_field(column)
    assert isinstance(model_field, CharField)
    max_length = model_field.max_length
    assert isinstance(max_length, int)
    assert fit_column(model, column, "x" * max_length, field=field) == "x" * max_length
    with pytest.raises(UserError) as refused:
        fit_column(model, column, "x" * (max_length + 1), field=field)
    assert refused.value.field == field
    assert f"longer than {max_length} characters ({max_length + 1})" in refused.value.message
    table = connection.ops.quote_name(model._meta.db_table)
    column_name = connection.ops.quote_name(str(model_field.column))
    with pytest.raises(DataError, match="value too long"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column_name} = %s WHERE false", ["x" * (max_length + 1)])  # noqa: S608


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite stores NUL characters; PostgreSQL refuses them")
@pytest.mark.django_db
def test_postgresql_refuses_nul_which_the_gate_refuses_first(member: tuple[Client, dict[str, int]]) -> None:
    client, _ = member
    with pytest.raises(DataError), transaction.atomic():
        ReviewRequest.objects.filter(model_identifier="a\x00b").exists()
    response = client.get("/api/v1/gate/", {"model": "a\x00b"})
    assert response.status_code == 400
    assert response.json() == {"detail": "A model identifier cannot contain NUL characters.", "field": "model"}
