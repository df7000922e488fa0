from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from auditportal.datasets.demo import (
    CATEGORICAL_FEATURES,
    DEFAULT_SEED,
    GENDERS,
    LABEL,
    NUMERIC_FEATURES,
    UNKNOWN_GENDER_TOKENS,
    demo_table,
    write_demo_csv,
)


def test_the_table_has_the_requested_rows_and_documented_columns() -> None:
    table = demo_table(rows=1_234, seed=5)

    assert table.num_rows == 1_234
    assert table.column_names == [
        "income",
        "debt_ratio",
        "credit_history_months",
        "num_accounts",
        "loan_amount",
        "employment_type",
        "region",
        "loan_purpose",
        "gender",
        "age_group",
        "repaid",
    ]
    assert table.schema.field(LABEL).type == pa.int8()
    assert set(table.column(LABEL).to_pylist()) == {0, 1}
    assert set(table.column("age_group").to_pylist()) == {"18-29", "30-44", "45-64", "65+"}
    for name in NUMERIC_FEATURES:
        assert pa.types.is_integer(table.schema.field(name).type) or pa.types.is_floating(table.schema.field(name).type)
    for name in CATEGORICAL_FEATURES:
        assert table.schema.field(name).type == pa.string()


def test_about_eight_percent_of_genders_are_unknown_in_a_mix_of_tokens() -> None:
    gender = demo_table(rows=50_000).column("gender").to_pandas()

    known = gender.isin(GENDERS)
    assert 0.07 <= 1 - known.mean() <= 0.09
    assert set(gender[~known]) == set(UNKNOWN_GENDER_TOKENS)
    assert gender.notna().all()
    assert (gender == "nonbinary").sum() > 0


def test_the_same_seed_gives_the_same_table_and_another_seed_does_not() -> None:
    assert demo_table(rows=3_000, seed=7).equals(demo_table(rows=3_000, seed=7))
    assert not demo_table(rows=3_000, seed=7).equals(demo_table(rows=3_000, seed=8))


def test_the_default_seed_is_the_documented_one() -> None:
    assert DEFAULT_SEED == 20261129
    assert demo_table(rows=500).equals(demo_table(rows=500, seed=20261129))


def test_the_csv_round_trips_including_the_messy_unknown_tokens(tmp_path: Path) -> None:
    path = write_demo_csv(tmp_path / "nested" / "demo.csv", rows=2_000, seed=3)

    assert path == tmp_path / "nested" / "demo.csv"
    read_back = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(strings_can_be_null=False))
    original = demo_table(rows=2_000, seed=3)
    assert read_back.num_rows == 2_000
    assert read_back.column("gender").to_pylist() == original.column("gender").to_pylist()
    assert read_back.column(LABEL).to_pylist() == original.column(LABEL).to_pylist()


def recall_by_gender(seed: int) -> dict[str, float]:
    frame = demo_table(rows=20_000, seed=seed).to_pandas()
    features = frame[[*NUMERIC_FEATURES, *CATEGORICAL_FEATURES]]
    train_x, test_x, train_y, test_y, _, test_gender = train_test_split(
        features, frame[LABEL], frame["gender"], test_size=0.3, random_state=0
    )
    encode = ColumnTransformer(
        [
            (
                "numeric",
                make_pipeline(SimpleImputer(strategy="median"), StandardScaler()),
                list(NUMERIC_FEATURES),
            ),
            ("categorical", OneHotEncoder(handle_unknown="ignore"), list(CATEGORICAL_FEATURES)),
        ]
    )
    model = make_pipeline(encode, LogisticRegression(max_iter=1_000))
    model.fit(train_x, train_y)
    predicted = pd.Series(model.predict(test_x), index=test_x.index)
    positives = test_y == 1
    return {gender: float(predicted[positives & (test_gender == gender)].mean()) for gender in ("female", "male")}


# Measured gaps are 0.20-0.23 over seeds 1-5 and the default; 0.10 leaves room for sampling noise
# (about 0.015 standard error with ~1,700 positives per gender in a test split).
@pytest.mark.parametrize("seed", [DEFAULT_SEED, 1, 2])
def test_a_model_without_gender_has_clearly_lower_recall_for_women(seed: int) -> None:
    recall = recall_by_gender(seed)

    assert recall["male"] - recall["female"] >= 0.10, recall


def test_repayment_itself_does_not_depend_on_gender() -> None:
    # The disparity must come from measurement alone, so the true repayment rates agree.
    frame = demo_table(rows=50_000, seed=4).to_pandas()
    rates = frame.groupby("gender")[LABEL].mean()

    assert abs(rates["female"] - rates["male"]) < 0.02
    assert np.isclose(frame[LABEL].mean(), 0.55, atol=0.03)
