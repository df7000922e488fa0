"""Small rules of English the portal's messages need in one place: the article before a noun
("an ML engineer", "a data steward", "an administrator") and a role's label inside a sentence."""

from __future__ import annotations

from typing import Final

# Letters whose name starts with a vowel sound, for an initialism read letter by letter ("an ML ...").
_VOWEL_SOUND_LETTERS: Final = frozenset("AEFHILMNORSX")
# Words spelt with a vowel but said with a consonant ("a user"), or the other way round ("an hour").
_CONSONANT_SOUND_PREFIXES: Final = ("uni", "use", "usu", "one", "eu", "ure")
_VOWEL_SOUND_PREFIXES: Final = ("hour", "honest", "honour", "heir")


def _is_initialism(word: str) -> bool:
    letters = [character for character in word if character.isalpha()]
    return len(letters) >= 2 and all(character.isupper() for character in letters)


def indefinite_article(phrase: str) -> str:
    """``a`` or ``an`` for the phrase that follows it, by sound: ``an ML engineer``, ``a reviewer``,
    ``an ethics-committee member``, ``a user``, ``an hour``."""
    word = phrase.strip().split(" ", 1)[0] if phrase.strip() else ""
    if not word:
        return "a"
    if _is_initialism(word):
        return "an" if word[0] in _VOWEL_SOUND_LETTERS else "a"
    lower = word.lower()
    if lower.startswith(_VOWEL_SOUND_PREFIXES):
        return "an"
    if lower.startswith(_CONSONANT_SOUND_PREFIXES):
        return "a"
    return "an" if lower[0] in "aeiou" else "a"


def with_article(phrase: str) -> str:
    """The phrase after its indefinite article: ``an ML engineer``."""
    return f"{indefinite_article(phrase)} {phrase}"


def in_sentence(label: str) -> str:
    """A label ("ML engineer", "Data steward") as it reads inside a sentence: the first letter lower
    case, unless the first word is an initialism ("ML engineer" stays, "Data steward" is "data steward")."""
    if not label:
        return label
    first = label.split(" ", 1)[0]
    if _is_initialism(first):
        return label
    return label[0].lower() + label[1:]
