"""Registration of real-world files (issue 13): repeated column names, single-value labels, attributes
that are all unknown, values longer than the database stores and fields longer than the CSV
reader's block, through the service, the CLI, the web form and the API."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db.models import CharField, Model
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.datasets import services
from auditportal.datasets.models import Dataset, DatasetVersion, GroupSummary, SensitiveAttribute, StagedUpload
from auditportal.experiments.ingest import points_upsert
from auditportal.experiments.models import MetricPoint, TrialVerdict
from auditportal.fairness.files import tabular
from auditportal.fairness.files.metricsfile import metric_group
from auditportal.fairness.files.tabular import DatasetError, DatasetSpec, read
from auditportal.fairness.files.tabular.spec import LONGEST_GROUP_METRIC, group_metric_length
from tests.factories import ExperimentFactory, TrialFactory, client_for
from tests.realworld import (
    DIFFERING_ROW,
    IDENTICAL_DECILE,
    IDENTICAL_PRIORS,
    LONG_GROUP,
    REPEATED_WARNING,
    all_unknown_attribute_csv,
    long_field_csv,
    long_group_csv,
    recidivism_csv,
    recidivism_parquet,
    recidivism_rows,
    single_value_label_csv,
)
from trainer import bias

RECIDIVISM_SPEC = DatasetSpec(label="two_year_recid", positive="1", attributes=("race", "sex"))
SPEC = DatasetSpec(label="approved", positive="1", attributes=("gender",))


def _register(user: User, source: Path, spec: DatasetSpec) -> DatasetVersion:
    return services.dataset_version_register(user=user, source=source, original_name=source.name, name="x", spec=spec)


def _refused(user: User, source: Path, spec: DatasetSpec) -> DatasetError:
    with pytest.raises(DatasetError) as caught:
        _register(user, source, spec)
    assert not DatasetVersion.objects.exists()
    assert not SensitiveAttribute.objects.exists()
    assert not GroupSummary.objects.exists()
    return caught.value


# --------------------------------------------------------------------------- the limits' one source


def _max_length(model: type[Model], field: str) -> int | None:
    found = model._meta.get_field(field)
    assert isinstance(found, CharField)
    return found.max_length


def test_the_core_limits_are_the_models_max_length() -> None:
    name = tabular.MAX_STORED_NAME
    assert _max_length(DatasetVersion, "label_column") == name
    assert _max_length(DatasetVersion, "positive_value") == name
    assert _max_length(SensitiveAttribute, "name") == name
    for field in ("name", "attribute", "group"):
        assert _max_length(MetricPoint, field) == name
    for model in (GroupSummary, TrialVerdict):
        for field in ("attribute", "group"):
            assert _max_length(model, field) == tabular.MAX_STORED_KEY


@pytest.mark.parametrize(
    ("attribute", "groups"),
    [(("gender",), [("f",), ("g" * 200,)]), (("a/b", "r&d"), [("x%y", "z" * 90), ("w", "v")])],
)
def test_the_longest_metric_name_is_the_trainers_own(attribute: tuple[str, ...], groups: list[tuple[str, ...]]) -> None:
    layout = bias.GroupLayout((bias.Attribute(attribute, tuple(groups)),))
    counts = np.ones(layout.n_slots * bias.CELLS, np.int64)
    names = [*bias.group_metrics(counts, layout), *bias.worker_share_metrics([np.ones(layout.n_slots)] * 100, layout)]
    assert max(len(name) for name in names) == max(group_metric_length(attribute, group) for group in groups)
    assert LONGEST_GROUP_METRIC.startswith("worker_share/")


# --------------------------------------------------------------------------- repeated column names


@pytest.mark.parametrize("make", [recidivism_csv, recidivism_parquet], ids=["csv", "parquet"])
def test_repeated_names_that_are_not_used_register_with_a_warning(
    alice: User, dataset_storage: Path, tmp_path: Path, make: object
) -> None:
    suffix = ".csv" if make is recidivism_csv else ".parquet"
    source = make(tmp_path / "in" / f"compas{suffix}")  # type: ignore[operator]
    version = _register(alice, source, RECIDIVISM_SPEC)
    assert version.num_rows == 120
    assert version.columns.count("decile_score") == 2
    # The default features leave the repeated names out.
    assert [f["name"] for f in version.features] == ["id", "age", "high_risk"]
    assert version.warnings == [REPEATED_WARNING]
    # The shards read the stored file again with the registered features.
    table = tabular.load_normalized(version.path, services.dataset_spec_for(version), display_name=source.name)
    assert table.column_names == ["id", "age", "high_risk", "_target", "_attr.race", "_attr.sex"]


@pytest.mark.parametrize(
    ("spec", "role"),
    [
        (
            DatasetSpec(label="two_year_recid", positive="1", attributes=("race",), features=("decile_score",)),
            "feature",
        ),
        (DatasetSpec(label="two_year_recid", positive="1", attributes=("decile_score",)), "sensitive attribute"),
        (DatasetSpec(label="decile_score", positive="1", attributes=("race",)), "label"),
    ],
)
def test_a_used_repeated_name_is_refused_naming_the_column(
    alice: User, dataset_storage: Path, tmp_path: Path, spec: DatasetSpec, role: str
) -> None:
    error = _refused(alice, recidivism_csv(tmp_path / "in" / "compas.csv", differ=True), spec)
    assert (error.file, error.row, error.column) == ("compas.csv", None, "decile_score")
    assert str(error) == (
        f"compas.csv, column 'decile_score': the {role} 'decile_score' is ambiguous: the file has 2 columns with "
        f"this name (columns 5 and 9 from the left) whose values differ (first in data row {DIFFERING_ROW}); give "
        "each column a unique name, or declare another column"
    )


@pytest.mark.parametrize("make", [recidivism_csv, recidivism_parquet], ids=["csv", "parquet"])
def test_a_repeated_name_whose_columns_are_identical_is_one_column_with_a_warning(
    alice: User, dataset_storage: Path, tmp_path: Path, make: Callable[..., Path]
) -> None:
    suffix = ".csv" if make is recidivism_csv else ".parquet"
    source = make(tmp_path / "in" / f"compas{suffix}")
    features = ("age", "priors_count", "decile_score")
    spec = DatasetSpec(label="two_year_recid", positive="1", attributes=("race", "sex"), features=features)
    version = _register(alice, source, spec)
    assert version.columns.count("decile_score") == 2
    assert [f["name"] for f in version.features] == ["age", "priors_count", "decile_score"]
    assert version.warnings == [IDENTICAL_DECILE, IDENTICAL_PRIORS]
    table = tabular.load_normalized(version.path, services.dataset_spec_for(version), display_name=source.name)
    assert table.column_names == ["age", "priors_count", "decile_score", "_target", "_attr.race", "_attr.sex"]
    assert table.column("decile_score").to_pylist() == [float(str(row[4])) for row in recidivism_rows()]
    body = client_for(alice).get(f"/api/v1/dataset-versions/{version.pk}/").json()
    assert body["warnings"] == [IDENTICAL_DECILE, IDENTICAL_PRIORS]


@pytest.mark.parametrize("make", [recidivism_csv, recidivism_parquet], ids=["csv", "parquet"])
def test_a_declared_repeated_name_whose_columns_differ_is_refused_in_either_format(
    alice: User, dataset_storage: Path, tmp_path: Path, make: Callable[..., Path]
) -> None:
    suffix = ".csv" if make is recidivism_csv else ".parquet"
    source = make(tmp_path / "in" / f"compas{suffix}", differ=True)
    spec = DatasetSpec(label="two_year_recid", positive="1", attributes=("race",), features=("decile_score",))
    error = _refused(alice, source, spec)
    assert error.column == "decile_score"
    assert f"(columns 5 and 9 from the left) whose values differ (first in data row {DIFFERING_ROW})" in str(error)


@pytest.mark.django_db
def test_the_cli_prints_the_warning_on_stderr(dataset_storage: Path, tmp_path: Path) -> None:
    out, err = StringIO(), StringIO()
    source = recidivism_csv(tmp_path / "in" / "compas.csv")
    call_command(
        "register_dataset", str(source), "--name", "compas", "--label", "two_year_recid", "--positive", "1",
        "--attribute", "race", stdout=out, stderr=err,
    )  # fmt: skip
    assert err.getvalue() == f"warning: compas.csv: {REPEATED_WARNING}\n"
    assert "warning" not in out.getvalue()
    assert out.getvalue().splitlines()[-1] == str(DatasetVersion.objects.get().pk)


@pytest.mark.django_db
def test_the_cli_refuses_a_used_repeated_name_whose_columns_differ(dataset_storage: Path, tmp_path: Path) -> None:
    source = recidivism_csv(tmp_path / "in" / "compas.csv", differ=True)
    with pytest.raises(
        CommandError, match=r"compas\.csv, column 'decile_score': the feature 'decile_score' is ambiguous"
    ):
        call_command(
            "register_dataset", str(source), "--name", "compas", "--label", "two_year_recid", "--positive", "1",
            "--attribute", "race", "--features", "age,decile_score", stdout=StringIO(), stderr=StringIO(),
        )  # fmt: skip
    assert not DatasetVersion.objects.exists()


def test_the_web_upload_step_warns_and_offers_only_a_repeated_name_whose_columns_are_identical(
    alice: User, dataset_storage: Path, tmp_path: Path, inline_worker: Callable[[], AbstractContextManager[Any]]
) -> None:
    client = client_for(alice)
    content = recidivism_csv(tmp_path / "compas.csv", differ=True).read_bytes()
    upload = SimpleUploadedFile("compas.csv", content, content_type="text/csv")
    with inline_worker():
        response = client.post(reverse("datasets:upload"), {"name": "compas", "file": upload})
    assert response.status_code == 302, response.content.decode()
    staged = StagedUpload.objects.get()
    page = client.get(response["Location"]).content.decode()
    assert "the file has more than one column named &#x27;decile_score&#x27; (columns 5 and 9)" in page
    assert "columns 6 and 10 are both named &#x27;priors_count&#x27; with identical values" in page
    assert 'value="decile_score"' not in page
    assert 'value="priors_count"' in page
    assert 'value="race"' in page

    # Posting a repeated name anyway is a form error; the upload stays for another try.
    bad = {"label": "two_year_recid", "positive": "1", "attributes": ["race"], "features": ["decile_score"]}
    response = client.post(reverse("datasets:declare", args=[staged.pk]), {**bad, "confirm_groups": "on"})
    assert response.status_code == 400
    assert "Select a valid choice. decile_score is not one of the available choices." in response.content.decode()

    good = {
        "label": "two_year_recid",
        "positive": "1",
        "attributes": ["race", "sex"],
        "features": ["age", "priors_count"],
        "confirm_groups": "on",
    }
    with inline_worker():
        response = client.post(reverse("datasets:declare", args=[staged.pk]), good)
    version = DatasetVersion.objects.get()
    response = client.get(response["Location"])
    assert response["Location"] == reverse("datasets:version", args=[version.pk])
    page = client.get(response["Location"]).content.decode()
    assert 'id="file-warning"' in page
    assert [f["name"] for f in version.features] == ["age", "priors_count"]
    assert f"compas.csv: {IDENTICAL_PRIORS}".replace("'", "&#x27;") in page
    assert "compas.csv: the file has more than one column named &#x27;decile_score&#x27;" in page


def test_the_api_gives_a_versions_warnings(alice: User, dataset_storage: Path, tmp_path: Path) -> None:
    version = _register(alice, recidivism_csv(tmp_path / "in" / "compas.csv"), RECIDIVISM_SPEC)
    body = client_for(alice).get(f"/api/v1/dataset-versions/{version.pk}/").json()
    assert body["warnings"] == [REPEATED_WARNING]
    clean = _register(alice, _plain_csv(tmp_path), SPEC)
    assert client_for(alice).get(f"/api/v1/dataset-versions/{clean.pk}/").json()["warnings"] == []


def _plain_csv(tmp_path: Path) -> Path:
    return long_group_csv(tmp_path / "in" / "plain.csv", value="f")


# --------------------------------------------------------------------------- labels and attributes


def test_a_single_value_label_is_refused_naming_its_value(alice: User, dataset_storage: Path, tmp_path: Path) -> None:
    error = _refused(alice, single_value_label_csv(tmp_path / "in" / "loans.csv"), SPEC)
    assert (error.row, error.column) == (None, "approved")
    assert str(error) == (
        "loans.csv, column 'approved': the label has a single value, '0', in all 20 rows: there are no positives "
        "(the positive value is '1'), and a fairness comparison needs rows of both outcomes; check the label column "
        "and the positive value"
    )


def test_a_label_whose_every_row_is_positive_is_refused(alice: User, dataset_storage: Path, tmp_path: Path) -> None:
    source = single_value_label_csv(tmp_path / "in" / "loans.csv")
    error = _refused(alice, source, DatasetSpec(label="approved", positive="0", attributes=("gender",)))
    assert "the label has a single value, '0', in all 20 rows: there are no negatives (rows with another value)" in str(
        error
    )


def test_an_attribute_whose_every_value_is_unknown_is_refused(
    alice: User, dataset_storage: Path, tmp_path: Path
) -> None:
    source = all_unknown_attribute_csv(tmp_path / "in" / "loans.csv")
    error = _refused(alice, source, DatasetSpec(label="approved", positive="1", attributes=("gender", "race")))
    assert (error.row, error.column) == (None, "race")
    assert str(error).startswith(
        "loans.csv, column 'race': every value of the sensitive attribute is unknown (values seen: '', '-1', "
        "'Unknown', 'unknown'), so it has no group to compare"
    )


# --------------------------------------------------------------------------- what the database stores


def test_a_300_character_group_is_refused_with_its_row_and_column(
    alice: User, dataset_storage: Path, tmp_path: Path
) -> None:
    # Before: a PostgreSQL DataError (a 500 on the web); a 256-511 character value registered and then
    # failed every metric insert.
    error = _refused(alice, long_group_csv(tmp_path / "in" / "loans.csv", row=7), SPEC)
    assert (error.file, error.row, error.column) == ("loans.csv", 7, "gender")
    room = 255 - len("worker_share/gender//rank99")
    assert str(error) == (
        f"loans.csv, row 7, column 'gender': the value '{LONG_GROUP[:79]}…' is 300 characters long; as a group of "
        f"this attribute it may have at most {room} ('/', '%' and '&' count three; the trainer's metric names, "
        "such as 'worker_share/{attribute}/{group}/rank99', must fit the 255 characters the database stores); "
        "shorten or recode the value"
    )


def test_a_group_that_fits_its_column_but_not_a_metric_name_is_refused(
    alice: User, dataset_storage: Path, tmp_path: Path
) -> None:
    room = 255 - len("worker_share/gender//rank99")
    error = _refused(alice, long_group_csv(tmp_path / "in" / "loans.csv", value="v" * (room + 1), row=3), SPEC)
    assert (error.row, error.column) == (3, "gender")
    assert f"is {room + 1} characters long; as a group of this attribute it may have at most {room} " in str(error)


def test_a_group_at_the_limit_registers_and_every_trainer_metric_about_it_is_stored(
    alice: User, dataset_storage: Path, tmp_path: Path
) -> None:
    # On PostgreSQL this inserts the longest names into varchar(255): a DataError would fail it.
    room = 255 - len("worker_share/gender//rank99")
    value = "v" * room
    version = _register(alice, long_group_csv(tmp_path / "in" / "loans.csv", value=value, row=3), SPEC)
    assert version.attributes.get().groups == ["f", "m", value]
    trial = TrialFactory.create(experiment=ExperimentFactory.create(dataset_version=version))
    layout = bias.GroupLayout.from_declared([("gender", ["f", "m", value])])
    counts = np.ones(layout.n_slots * bias.CELLS, np.int64)
    names = [*bias.group_metrics(counts, layout), *bias.worker_share_metrics([np.ones(layout.n_slots)] * 100, layout)]
    assert max(len(name) for name in names) == 255
    points_upsert([(trial.pk, "validation", 1, name, 1.0, *metric_group(name)) for name in names])
    assert MetricPoint.objects.filter(trial=trial).count() == len(names)


def test_the_intersection_of_the_first_two_attributes_must_fit_too(
    alice: User, dataset_storage: Path, tmp_path: Path
) -> None:
    rows = [f"{i},{'a' * 120 if i % 2 else 'b'},{'c' * 120 if i % 3 else 'd'},{i % 2}" for i in range(12)]
    source = tmp_path / "in" / "loans.csv"
    source.parent.mkdir()
    source.write_text("income,gender,race,approved\n" + "\n".join(rows) + "\n")
    spec = DatasetSpec(label="approved", positive="1", attributes=("gender", "race"))
    error = _refused(alice, source, spec)
    assert error.column == "gender"
    assert str(error).startswith(
        "loans.csv, column 'gender': the intersection of 'gender' and 'race' makes metric names of up to 273 characters"
    )
    # Each alone fits, so declaring only one of them registers.
    _register(alice, source, DatasetSpec(label="approved", positive="1", attributes=("gender",)))


def test_a_long_attribute_or_label_name_is_refused(alice: User, dataset_storage: Path, tmp_path: Path) -> None:
    attribute = "a" * 230
    source = tmp_path / "in" / "loans.csv"
    source.parent.mkdir()
    label = "l" * 256
    source.write_text(f"{attribute},{label}\nf,1\nm,0\n")
    error = _refused(alice, source, DatasetSpec(label=label, positive="1", attributes=(attribute,)))
    assert (error.column, str(error).split(": ", 1)[1]) == (
        label,
        "the label column's name is 256 characters long, more than the 255 the database stores; shorten it",
    )
    error = _refused(alice, source, DatasetSpec(label=label[:200], positive="1", attributes=(attribute,)))
    assert error.column == label[:200]  # a missing column is named first
    source.write_text(f"{attribute},label\nf,1\nm,0\n")
    error = _refused(alice, source, DatasetSpec(label="label", positive="1", attributes=(attribute,)))
    assert error.column == attribute
    assert "the sensitive attribute's name is 230 characters long; in the trainer's metric names" in str(error)
    assert f"it may have at most {255 - len('worker_share//unknown/rank99')}," in str(error)


def test_the_web_form_shows_a_long_value_as_a_form_error_not_a_server_error(
    alice: User, dataset_storage: Path, tmp_path: Path, inline_worker: Callable[[], AbstractContextManager[Any]]
) -> None:
    client = client_for(alice)
    upload = SimpleUploadedFile("loans.csv", long_group_csv(tmp_path / "l.csv").read_bytes(), content_type="text/csv")
    with inline_worker():
        response = client.post(reverse("datasets:upload"), {"name": "loans", "file": upload})
    staged = StagedUpload.objects.get()
    with inline_worker():
        response = client.post(
            response["Location"],
            {"label": "approved", "positive": "1", "attributes": ["gender"], "confirm_groups": "on"},
        )
    response = client.get(response["Location"])
    assert response.status_code == 200
    assert (
        response.context["form"].non_field_errors()[0].startswith("loans.csv, row 7, column 'gender': the value 'ggg")
    )
    assert "loans.csv, row 7, column &#x27;gender&#x27;: the value &#x27;ggg" in response.content.decode()
    assert StagedUpload.objects.filter(pk=staged.pk).exists()
    assert not Dataset.objects.exists()


# --------------------------------------------------------------------------- long fields


def test_a_field_longer_than_the_readers_block_is_read_with_a_larger_block(
    alice: User, dataset_storage: Path, tmp_path: Path
) -> None:
    source = long_field_csv(tmp_path / "in" / "loans.csv", field_bytes=3 * 2**20)
    version = _register(alice, source, SPEC)
    assert version.num_rows == 10
    assert {"name": "notes", "kind": "categorical"} in version.features


def test_a_row_over_the_bound_is_refused_with_its_row_and_column(
    alice: User, dataset_storage: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read, "MAX_ROW_BYTES", 2 * 2**20)
    source = long_field_csv(tmp_path / "in" / "loans.csv", field_bytes=3 * 2**20, row=4)
    error = _refused(alice, source, SPEC)
    assert (error.row, error.column) == (4, "notes")
    assert str(error) == (
        "loans.csv, row 4, column 'notes': this row is 3.0 MiB long, over the limit of 2.0 MiB for one row (its "
        "longest field is 3.0 MiB); shorten the field, or leave the column out of the file"
    )
    assert "straddl" not in str(error)


def test_a_short_row_after_a_long_field_is_still_found(alice: User, dataset_storage: Path, tmp_path: Path) -> None:
    source = long_field_csv(tmp_path / "in" / "loans.csv", field_bytes=3 * 2**20)
    with source.open("a") as handle:
        handle.write("11,f\n")
    error = _refused(alice, source, SPEC)
    assert error.row == 11
    assert "this row has 2 fields but the header has 5 columns" in str(error)
