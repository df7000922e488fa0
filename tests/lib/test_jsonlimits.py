from __future__ import annotations

import time

import pytest

from auditportal.lib.jsonlimits import MAX_DEPTH, JSONInputError, json_loads


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_json_as_deep_as_the_limit_is_parsed() -> None:
    value = json_loads(nested(MAX_DEPTH), field="hparams")
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == []


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 1_000_000])
def test_deeper_json_is_refused_naming_the_field_before_it_is_parsed(depth: int) -> None:
    started = time.perf_counter()
    with pytest.raises(JSONInputError) as refused:
        json_loads(nested(depth), field="hparams")
    assert time.perf_counter() - started < 2
    assert refused.value.field == "hparams"
    assert refused.value.message == f"hparams: JSON nested more than {MAX_DEPTH} levels deep is not accepted."


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = '{"a": "' + "[" * 100 + '", "b": "\\"[[[[", "c": [1]}'
    assert json_loads(text, field="body") == {"a": "[" * 100, "b": '"[[[[', "c": [1]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"a": "\xff"}', "body: not UTF-8 (byte 7 cannot be decoded); send JSON as UTF-8."),
        ('{"a": NaN}', "body: not valid JSON: NaN is not a JSON number"),
        ('{"a": -Infinity}', "body: not valid JSON: -Infinity is not a JSON number"),
        ('{"a": 1', "body: not valid JSON: Expecting ',' delimiter: line 1 column 8 (char 7)"),
        ("9" * 5000, "body: not valid JSON: Exceeds the limit (4300 digits) for integer string conversion"),
    ],
)
def test_what_is_not_json_is_refused_naming_the_field(text: str | bytes, message: str) -> None:
    with pytest.raises(JSONInputError) as refused:
        json_loads(text, field="body")
    assert refused.value.field == "body"
    assert refused.value.message.startswith(message)
