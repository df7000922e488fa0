"""ProPublica's own COMPAS file (issue 32): it repeats `decile_score` and `priors_count` with identical
values, registers with `priors_count` as a feature and audits with `--score decile_score --threshold 5`,
giving ProPublica's published error rates.

The published rates ("How We Analyzed the COMPAS Recidivism Algorithm", 2016, and the truth tables of
its notebook, github.com/propublica/compas-analysis): among defendants who did not reoffend within two
years, Black defendants were labelled higher risk (score 5 or more: "Medium" or "High") at 44.85% and
white defendants at 23.45% (the article's 44.9% vs 23.5%); among those who did, Black defendants were
labelled low risk at 27.99% and white defendants at 47.72% (28.0% vs 47.7%). Dressel and Farid (Science
Advances, 2018, table 2) give the same 44.8/23.5/28.0/47.7% for COMPAS on these 7,214 defendants. These
rates are over every row of the file: the filter of the notebook's first section (screening within 30
days of arrest, etc., 6,172 rows) is for its logistic regression, not for the truth tables.
"""

from __future__ import annotations

import gzip
import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from auditportal.datasets.models import DatasetVersion

DATA = Path(__file__).parent.parent / "data" / "propublica" / "compas-scores-two-years.csv.gz"
DECILE = "columns 12 and 40 are both named 'decile_score' with identical values; the first is used"
PRIORS = "columns 15 and 49 are both named 'priors_count' with identical values; the first is used"
# (false positives, negatives, false negatives, positives) in ProPublica's truth tables.
PUBLISHED = {"African-American": (805, 1795, 532, 1901), "Caucasian": (349, 1488, 461, 966)}
PUBLISHED_PERCENT = {"African-American": (44.85, 27.99), "Caucasian": (23.45, 47.72)}  # FPR, FNR


@pytest.fixture
def compas(tmp_path: Path) -> Path:
    path = tmp_path / "compas-scores-two-years.csv"
    with gzip.open(DATA, "rb") as packed, path.open("wb") as out:
        shutil.copyfileobj(packed, out)
    return path


@pytest.mark.django_db
def test_the_raw_file_registers_with_priors_count_as_a_feature(dataset_storage: Path, compas: Path) -> None:
    out, err = StringIO(), StringIO()
    call_command(
        "register_dataset", str(compas), "--name", "compas", "--label", "two_year_recid", "--positive", "1",
        "--attribute", "race", "--attribute", "sex", "--features", "age,priors_count,juv_fel_count",
        stdout=out, stderr=err,
    )  # fmt: skip
    version = DatasetVersion.objects.get()
    assert (version.num_rows, version.positives) == (7214, 3251)
    assert version.columns.count("priors_count") == 2
    assert [f["name"] for f in version.features] == ["age", "priors_count", "juv_fel_count"]
    assert version.warnings[0] == PRIORS
    assert err.getvalue().splitlines()[0] == f"warning: compas-scores-two-years.csv: {PRIORS}"


@pytest.mark.django_db
def test_the_raw_file_audits_with_the_published_rates(compas: Path) -> None:
    out, err = StringIO(), StringIO()
    call_command(
        "audit_predictions", str(compas), "--label", "two_year_recid", "--score", "decile_score",
        "--threshold", "5", "--attribute", "race", "--attribute", "sex", "--format", "json",
        stdout=out, stderr=err,
    )  # fmt: skip
    document = json.loads(out.getvalue())
    assert document["rows"] == 7214
    assert document["warnings"][0] == DECILE
    assert err.getvalue().splitlines()[0] == f"warning: compas-scores-two-years.csv: {DECILE}"
    groups = document["attributes"]["race"]["groups"]
    for race, (fp, negatives, fn, positives) in PUBLISHED.items():
        group = groups[race]
        assert (group["fp"], group["negatives"], group["fn"], group["positives"]) == (fp, negatives, fn, positives)
        fpr, fnr = PUBLISHED_PERCENT[race]
        assert round(100 * group["fpr"], 2) == fpr
        assert round(100 * group["fnr"], 2) == fnr
