"""Download names made from people's text, and the Content-Disposition that carries them (RFC 6266)."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from auditportal.lib.downloads import NAME_PART_CHARS, content_disposition, name_part


@pytest.mark.parametrize(
    ("text", "unicode", "ascii"),
    [
        ("Credit model v5", "credit-model-v5", "credit-model-v5"),
        ('Say "hi"\r\nX-Evil: 1', "say-hi-x-evil-1", "say-hi-x-evil-1"),
        ("../../etc/passwd", "etcpasswd", "etcpasswd"),
        ("Modèle de crédit — 信用模型", "modèle-de-crédit-信用模型", "modele-de-credit"),
        ("\u202etxt.exe", "txtexe", "txtexe"),
        ("!!! ???", "", ""),
        ("-- a --", "a", "a"),
    ],
)
def test_a_name_part_keeps_letters_digits_and_hyphens_only(text: str, unicode: str, ascii: str) -> None:
    assert name_part(text, ascii_only=False) == unicode
    assert name_part(text, ascii_only=True) == ascii


def test_a_long_name_part_is_cut_without_a_trailing_hyphen() -> None:
    part = name_part("word " * 100, ascii_only=True)
    assert len(part) <= NAME_PART_CHARS
    assert not part.endswith("-")
    assert part.startswith("word-word")


def test_the_header_carries_the_name_in_utf_8_and_an_ascii_fallback() -> None:
    header = content_disposition("review-request-3-modèle-信用-r1.pdf", fallback="review-request-3-modele-r1.pdf")
    assert header == (
        'attachment; filename="review-request-3-modele-r1.pdf"; '
        "filename*=UTF-8''review-request-3-mod%C3%A8le-%E4%BF%A1%E7%94%A8-r1.pdf"
    )
    assert unquote(header.split("''", 1)[1]) == "review-request-3-modèle-信用-r1.pdf"
    assert content_disposition("a.pdf", fallback="a.pdf", inline=True).startswith('inline; filename="a.pdf"')


@pytest.mark.parametrize("fallback", ['a".pdf', "a\r\nb.pdf", "modèle.pdf", "a b.pdf", "a/b.pdf", ""])
def test_a_fallback_that_is_not_a_plain_ascii_name_is_refused(fallback: str) -> None:
    with pytest.raises(ValueError, match="fallback file name"):
        content_disposition("a.pdf", fallback=fallback)
