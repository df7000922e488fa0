from __future__ import annotations

from pathlib import Path

import pytest

from auditportal.lib.env import EnvError, env_bool, env_float, env_int, env_list, env_size, env_str


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("TRUE", True), ("on", True), ("0", False), ("No", False)])
def test_env_bool_reads_the_usual_spellings(raw: str, expected: bool) -> None:
    assert env_bool("DEBUG", not expected, environ={"DEBUG": raw}) is expected


def test_env_bool_rejects_junk_instead_of_guessing() -> None:
    with pytest.raises(EnvError, match=r"DEBUG='ture' is not a boolean"):
        env_bool("DEBUG", False, environ={"DEBUG": "ture"})


def test_env_bool_uses_the_default_when_unset() -> None:
    assert env_bool("DEBUG", True, environ={}) is True


def test_env_str_reads_a_secret_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("s3cret\n")
    assert env_str("SECRET_KEY", environ={"SECRET_KEY_FILE": str(secret)}) == "s3cret"


def test_env_str_refuses_both_a_value_and_a_file(tmp_path: Path) -> None:
    with pytest.raises(EnvError, match="SECRET_KEY and SECRET_KEY_FILE are both set"):
        env_str("SECRET_KEY", environ={"SECRET_KEY": "a", "SECRET_KEY_FILE": str(tmp_path / "k")})


def test_env_str_names_an_unreadable_secret_file(tmp_path: Path) -> None:
    with pytest.raises(EnvError, match=r"SECRET_KEY_FILE=.*cannot be read"):
        env_str("SECRET_KEY", environ={"SECRET_KEY_FILE": str(tmp_path / "missing")})


def test_env_str_requires_a_value_without_default() -> None:
    with pytest.raises(EnvError, match="SECRET_KEY is required"):
        env_str("SECRET_KEY", environ={})


def test_env_int_rejects_words_and_values_below_the_minimum() -> None:
    with pytest.raises(EnvError, match="is not an integer"):
        env_int("N", 1, environ={"N": "ten"})
    with pytest.raises(EnvError, match="below the minimum of 1"):
        env_int("N", 1, minimum=1, environ={"N": "0"})
    assert env_int("N", 1, environ={"N": " 42 "}) == 42


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("2GiB", 2 * 1024**3), ("500MB", 500 * 1024**2), ("1048576", 1048576), ("1.5k", 1536)],
)
def test_env_size_reads_binary_units(raw: str, expected: int) -> None:
    assert env_size("SIZE", 1, environ={"SIZE": raw}) == expected


@pytest.mark.parametrize("raw", ["lots", "5 parsecs", "0", "GiB"])
def test_env_size_rejects_what_is_not_a_size(raw: str) -> None:
    with pytest.raises(EnvError, match="SIZE="):
        env_size("SIZE", 1, environ={"SIZE": raw})


def test_env_list_splits_on_commas_and_drops_blanks() -> None:
    assert env_list("HOSTS", ["x"], environ={"HOSTS": "a.example, b.example,,"}) == ["a.example", "b.example"]
    assert env_list("HOSTS", ["x"], environ={}) == ["x"]


def test_env_float_reads_numbers_within_bounds_and_names_the_variable_otherwise() -> None:
    assert env_float("ALPHA", 0.05, minimum=0, maximum=1, environ={"ALPHA": "0.01"}) == 0.01
    assert env_float("ALPHA", 0.05, environ={}) == 0.05
    with pytest.raises(EnvError, match="ALPHA='five' is not a number"):
        env_float("ALPHA", 0.05, environ={"ALPHA": "five"})
    with pytest.raises(EnvError, match=r"ALPHA='1\.5' must lie between 0 and 1"):
        env_float("ALPHA", 0.05, minimum=0, maximum=1, environ={"ALPHA": "1.5"})
    with pytest.raises(EnvError, match="must lie between"):
        env_float("ALPHA", 0.05, minimum=0, maximum=1, environ={"ALPHA": "nan"})
