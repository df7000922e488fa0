"""Downloads named from people's text (a review request's title): a name part that is safe in a header
and on any file system, and the Content-Disposition header that carries the name (RFC 6266)."""

from __future__ import annotations

from urllib.parse import quote

from django.utils.text import slugify

# The longest name part made from text: enough to recognise a title, short for every file system.
NAME_PART_CHARS = 60


def name_part(text: str, *, ascii_only: bool, limit: int = NAME_PART_CHARS) -> str:
    """``text`` as a lower-case, hyphenated part of a file name: letters, digits, ``_`` and ``-`` only
    (quotes, slashes, line breaks, controls and the rest dropped), at most ``limit`` characters, no
    leading or trailing hyphen; accents folded to ASCII (other scripts dropped) when ``ascii_only``.
    Empty when nothing of ``text`` is left."""
    slug = slugify(text, allow_unicode=not ascii_only)
    return slug[:limit].strip("-_")


def content_disposition(filename: str, *, fallback: str, inline: bool = False) -> str:
    """The Content-Disposition of a download named ``filename`` (any Unicode, from ``name_part``s):
    ``filename*`` with it in UTF-8, percent-encoded (RFC 5987), and ``filename`` with ``fallback``
    (ASCII letters, digits, ``.``, ``_`` and ``-`` only) for clients that do not read ``filename*``."""
    if not fallback or not all(
        character.isascii() and (character.isalnum() or character in "._-") for character in fallback
    ):
        raise ValueError(f"the fallback file name {fallback!r} must be ASCII letters, digits, '.', '_' and '-'")
    kind = "inline" if inline else "attachment"
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
