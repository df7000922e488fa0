"""The file of issue 11, shared by the tests of every place an intersection is named.

gender is in {a, a&b} and race in {b&c, c}: joined with a bare "&", the pairs (a, b&c) and (a&b, c)
both read "a&b&c". Each of the four pairs has a different number of rows, so a merge changes the
counts; one more row has no race (unknown in the intersection).
"""

from __future__ import annotations

from pathlib import Path

CSV = """label,pred,score,gender,race
1,1,0.9,a,b&c
1,0,0.2,a,c
0,0,0.1,a,c
1,1,0.8,a&b,b&c
0,1,0.7,a&b,b&c
0,0,0.3,a&b,b&c
1,1,0.9,a&b,c
1,1,0.6,a&b,c
1,0,0.4,a&b,c
0,1,0.8,a&b,c
0,1,0.9,a,
"""

ATTRIBUTE_KEY = "gender&race"
# (gender, race) -> the key of docs/audit-json.md, rows, positives, (tp, fn, fp, tn) of "pred"
PAIRS: dict[tuple[str, str], tuple[str, int, int, tuple[int, int, int, int]]] = {
    ("a", "b&c"): ("a&b%26c", 1, 1, (1, 0, 0, 0)),
    ("a", "c"): ("a&c", 2, 1, (0, 1, 0, 1)),
    ("a&b", "b&c"): ("a%26b&b%26c", 3, 1, (1, 0, 1, 1)),
    ("a&b", "c"): ("a%26b&c", 4, 3, (2, 1, 1, 0)),
}
UNKNOWN = 1  # rows unknown in the intersection


def key_of(pair: tuple[str, str]) -> str:
    return PAIRS[pair][0]


def rows_by_key() -> dict[str, int]:
    return {key: rows for key, rows, _, _ in PAIRS.values()}


def write_csv(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CSV, encoding="utf-8")
    return path
