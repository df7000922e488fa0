from __future__ import annotations

import pickle

import pytest

from auditportal.experiments.configs import ConfigError
from auditportal.fairness.errors import UserError
from auditportal.fairness.files.sharding import ShardingError
from auditportal.fairness.files.tabular import DatasetError
from auditportal.fairness.statistics.attributions import AttributionsError
from auditportal.fairness.statistics.audit import AuditSpecError
from auditportal.fairness.statistics.sequential import MonitorPolicyError

ERRORS = [
    pytest.param(UserError("name the dataset", field="name"), "name the dataset", "name", id="UserError"),
    pytest.param(
        DatasetError("value 'x' is odd", file="credit.csv", row=3, column="label"),
        "credit.csv, row 3, column 'label': value 'x' is odd",
        "label",
        id="DatasetError",
    ),
    pytest.param(AuditSpecError("threshold", "a score column needs a threshold"), None, "threshold", id="AuditSpec"),
    pytest.param(ConfigError("hparams", "Unknown hyperparameter 'lr'."), None, "hparams", id="ConfigError"),
    pytest.param(ShardingError("parts must be at least 1, got 0"), None, None, id="ShardingError"),
    pytest.param(
        AttributionsError("the attributions file has no 'scores' array"), None, "attributions", id="Attributions"
    ),
    pytest.param(
        MonitorPolicyError("a rate limit must lie strictly between 0 and 1", field="limit"), None, "limit", id="Monitor"
    ),
]


@pytest.mark.parametrize(("error", "text", "field"), ERRORS)
def test_every_user_error_says_what_to_fix_and_where(error: UserError, text: str | None, field: str | None) -> None:
    assert isinstance(error, UserError)
    assert isinstance(error, ValueError)
    assert str(error) == (text or error.message)
    assert error.field == field


@pytest.mark.parametrize(("error", "text", "field"), ERRORS)
def test_every_user_error_survives_pickling_for_celery(error: UserError, text: str | None, field: str | None) -> None:
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes, round-tripped
    assert type(copy) is type(error)
    assert (str(copy), copy.message, copy.field, copy.args) == (str(error), error.message, field, error.args)
    if isinstance(error, DatasetError):
        assert isinstance(copy, DatasetError)
        assert (copy.file, copy.row, copy.column) == (error.file, error.row, error.column)
