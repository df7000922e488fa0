from __future__ import annotations

import pytest

from auditportal.fairness.text.words import in_sentence, indefinite_article, with_article


@pytest.mark.parametrize(
    ("phrase", "article"),
    [
        ("ML engineer", "an"),  # "em-ell": an initialism read letter by letter
        ("API token", "an"),
        ("CSV file", "a"),
        ("SHA-256", "an"),
        ("reviewer", "a"),
        ("data steward", "a"),
        ("ethics-committee member", "an"),
        ("administrator", "an"),
        ("user", "a"),
        ("unknown value", "an"),
        ("hour", "an"),
        ("", "a"),
    ],
)
def test_the_article_follows_the_sound(phrase: str, article: str) -> None:
    assert indefinite_article(phrase) == article
    assert with_article(phrase) == f"{article} {phrase}"


def test_a_label_inside_a_sentence_keeps_its_initialism() -> None:
    assert in_sentence("ML engineer") == "ML engineer"
    assert in_sentence("Data steward") == "data steward"
    assert in_sentence("Ethics-committee member") == "ethics-committee member"
    assert in_sentence("") == ""
