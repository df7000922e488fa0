"""A synthetic credit-decision dataset with one known, injected disparity.

Generative story (every draw comes from one seeded ``numpy`` generator, so a seed fixes the table):

* Each applicant has a latent creditworthiness ``z ~ N(0, 1)``. Repayment depends on ``z``, the
  employment type and the loan's size relative to income, and on nothing else: **gender and age
  group have no effect on whether someone repays.**
* ``age_group`` ("18-29" 22 %, "30-44" 31 %, "45-64" 33 %, "65+" 14 %) drives an exact age, which
  bounds the credit history and shapes employment (most over-65s are retired).
* Features: ``income`` (log-normal, higher with ``z``, age and employment), ``debt_ratio`` (lower
  with ``z``; about 2 % missing, as a null), ``credit_history_months`` (longer with age and ``z``),
  ``num_accounts`` (Poisson, grows with history), ``loan_amount`` (a multiple of income that
  depends on the purpose), and the categoricals ``employment_type``, ``region`` and
  ``loan_purpose``.
* Label ``repaid``: int8, 1 = repaid (the positive class; declare the positive value as "1"),
  about 55 % positive.
* ``gender``: "female" 46 %, "male" 44 %, "nonbinary" 2 %, and 8 % unknown written the way messy
  exports write it: a mix of "" (half), "unknown" (three tenths) and "-1" (one fifth). All three
  are in the portal's default unknown tokens ("", "nan", "-1", "unknown").

Injected disparity (measurement bias, "thin file"): for women the credit bureau records only
accounts held in their own name, so the *recorded* ``credit_history_months`` is 35 % of the true
value plus noise and the recorded ``num_accounts`` keeps each account with probability 0.4.
Repayment still follows the true creditworthiness. A model trained on the recorded features
(gender not among them) therefore underestimates creditworthy women: its recall (the share of
repaid loans it would approve) is about 0.63 for women against 0.85 for men, a gap of about 0.2
(seeds 1-5 and the default, logistic regression, 0.5 threshold). Women's false-positive rate is
lower too. Men, nonbinary applicants and applicants of unknown gender are measured without bias.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

DEFAULT_SEED = 20261129

LABEL = "repaid"
NUMERIC_FEATURES = ("income", "debt_ratio", "credit_history_months", "num_accounts", "loan_amount")
CATEGORICAL_FEATURES = ("employment_type", "region", "loan_purpose")
GENDERS = ("female", "male", "nonbinary")
AGE_GROUPS = ("18-29", "30-44", "45-64", "65+")
UNKNOWN_GENDER_TOKENS = ("", "unknown", "-1")
DISADVANTAGED_GENDER = "female"
UNKNOWN_GENDER_SHARE = 0.08

_AGE_BOUNDS = np.array([[18, 30], [30, 45], [45, 65], [65, 90]])
_EMPLOYMENT = ("salaried", "self_employed", "contract", "unemployed", "retired")
# Rows: age group; columns: employment type.
_EMPLOYMENT_BY_AGE = np.array(
    [
        [0.55, 0.08, 0.27, 0.10, 0.00],
        [0.64, 0.14, 0.15, 0.07, 0.00],
        [0.60, 0.17, 0.10, 0.08, 0.05],
        [0.08, 0.10, 0.04, 0.03, 0.75],
    ]
)
_EMPLOYMENT_INCOME = np.array([0.0, 0.1, -0.15, -0.9, -0.35])
_EMPLOYMENT_RISK = np.array([0.0, -0.35, -0.25, -0.9, 0.1])
_REGIONS = ("north", "south", "east", "west", "central")
_PURPOSES = ("home", "car", "education", "debt_consolidation", "business", "other")
_PURPOSE_SHARE = np.array([0.22, 0.24, 0.1, 0.24, 0.08, 0.12])
_PURPOSE_SIZE = np.array([2.5, 0.5, 0.4, 0.35, 0.8, 0.2])


def demo_table(rows: int = 50_000, seed: int = DEFAULT_SEED) -> pa.Table:
    if rows < 1:
        raise ValueError(f"rows must be at least 1, got {rows}")
    rng = np.random.default_rng(seed)

    z = rng.standard_normal(rows)
    age_group = rng.choice(len(AGE_GROUPS), size=rows, p=[0.22, 0.31, 0.33, 0.14])
    low, high = _AGE_BOUNDS[age_group, 0], _AGE_BOUNDS[age_group, 1]
    age = low + rng.random(rows) * (high - low)
    # Inverse-CDF sampling of a categorical whose probabilities depend on the age group.
    cumulative = _EMPLOYMENT_BY_AGE.cumsum(axis=1)[age_group]
    employment = (rng.random(rows)[:, None] > cumulative).sum(axis=1).clip(0, len(_EMPLOYMENT) - 1)
    region = rng.integers(0, len(_REGIONS), rows)
    purpose = rng.choice(len(_PURPOSES), size=rows, p=_PURPOSE_SHARE)

    prime_age = -(((age - 48) / 20) ** 2)
    income = np.exp(10.55 + 0.15 * z + 0.25 * prime_age + _EMPLOYMENT_INCOME[employment] + rng.normal(0, 0.3, rows))
    debt_ratio = 1 / (1 + np.exp(1.0 + 0.35 * z + rng.normal(0, 0.45, rows)))
    max_history = (age - 18) * 12
    history = np.clip(90 + 60 * z + 1.5 * (age - 40) + rng.normal(0, 15, rows), 0, max_history)
    accounts = rng.poisson(1.5 + history / 48 + 0.5 * np.clip(z, 0, None))
    loan_amount = income * _PURPOSE_SIZE[purpose] * rng.lognormal(0, 0.35, rows)

    burden = loan_amount / income
    logit = 0.5 + 1.7 * z + _EMPLOYMENT_RISK[employment] - 0.35 * (burden - 0.8) + 0.004 * (age - 40)
    repaid = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(np.int8)

    # Gender has no influence on anything above; it only changes how the bureau records history.
    gender_code = rng.choice(
        len(GENDERS) + 1,
        size=rows,
        p=[0.46, 0.44, 0.02, UNKNOWN_GENDER_SHARE],
    )
    female = gender_code == GENDERS.index(DISADVANTAGED_GENDER)
    recorded_history = history.copy()
    recorded_history[female] = np.clip(0.35 * history[female] + rng.normal(0, 12, female.sum()), 0, None)
    recorded_accounts = accounts.copy()
    recorded_accounts[female] = rng.binomial(accounts[female], 0.4)

    unknown_token = rng.choice(len(UNKNOWN_GENDER_TOKENS), size=rows, p=[0.5, 0.3, 0.2])
    gender_labels = np.array([*GENDERS, *UNKNOWN_GENDER_TOKENS], dtype=object)
    gender = gender_labels[np.where(gender_code < len(GENDERS), gender_code, len(GENDERS) + unknown_token)]

    debt_ratio_column = np.round(debt_ratio, 4)
    missing_debt_ratio = rng.random(rows) < 0.02

    return pa.table(
        {
            "income": pa.array(np.round(income, -1)),
            "debt_ratio": pa.array(debt_ratio_column, mask=missing_debt_ratio),
            "credit_history_months": pa.array(np.round(recorded_history).astype(np.int64)),
            "num_accounts": pa.array(recorded_accounts.astype(np.int64)),
            "loan_amount": pa.array(np.round(loan_amount, -2)),
            "employment_type": pa.array(np.array(_EMPLOYMENT, dtype=object)[employment]),
            "region": pa.array(np.array(_REGIONS, dtype=object)[region]),
            "loan_purpose": pa.array(np.array(_PURPOSES, dtype=object)[purpose]),
            "gender": pa.array(gender, type=pa.string()),
            "age_group": pa.array(np.array(AGE_GROUPS, dtype=object)[age_group]),
            LABEL: pa.array(repaid),
        }
    )


def write_demo_csv(path: Path, *, rows: int = 50_000, seed: int = DEFAULT_SEED) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pacsv.write_csv(demo_table(rows, seed), path)
    return path
