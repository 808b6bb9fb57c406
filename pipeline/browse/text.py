"""What a search matches: text folded (case and accents), cut into words, and a query read as words and quoted
phrases, once, in Python; ``site/assets/search.js`` folds and cuts the same way in the browser, so a phrase found
by ``podscribe search`` is found on the site too (tests/test_browse.py holds both to the same examples).

- folding: each character decomposed (NFKD), its marks dropped (Unicode category M), lower-cased: ``Café`` and
  ``CAFE`` fold alike; it is done character by character, so an offset in the folded text maps back to the
  character of the transcript it came from (the hit is marked in the original text);
- a word is a run of letters and digits (``[^\\W_]``, in JavaScript ``[\\p{L}\\p{N}]``): ``don't`` is the two
  words ``don`` and ``t``, in the text and in a query alike;
- a query: words (each must be in the segment, in any order) and ``"quoted phrases"`` (their words one after the
  other in one segment).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

WORD = re.compile(r"[^\W_]+")


def fold_char(ch: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.category(c).startswith("M")).lower()


def fold(text: str) -> str:
    """Case and accents folded (ASCII text: only lower-cased, the common case and the fast one)."""
    if text.isascii():
        return text.lower()
    return "".join(fold_char(ch) for ch in text)


def fold_with_offsets(text: str) -> tuple[str, list[int]]:
    """The folded text and, for each of its characters, the offset in ``text`` of the character it came from
    (one more entry at the end: ``len(text)``)."""
    if text.isascii():
        return text.lower(), [*range(len(text)), len(text)]
    out, where = [], []
    for i, ch in enumerate(text):
        folded = fold_char(ch)
        out.append(folded)
        where += [i] * len(folded)
    return "".join(out), [*where, len(text)]


def words(text: str) -> list[str]:
    """The folded words of ``text``."""
    return WORD.findall(fold(text))


@dataclass(frozen=True)
class Query:
    """A search: ``terms``, each a tuple of folded words (one word, or a quoted phrase's words in order)."""

    text: str
    terms: tuple[tuple[str, ...], ...]

    @property
    def empty(self) -> bool:
        return not self.terms


def parse(text: str) -> Query:
    """Words and ``"quoted phrases"`` (an unclosed quote runs to the end); words that fold to nothing (punctuation)
    are dropped, and a query of nothing else is empty."""
    terms: list[tuple[str, ...]] = []
    for i, part in enumerate(text.replace("\u201c", '"').replace("\u201d", '"').split('"')):
        found = words(part)
        if i % 2:  # inside quotes: one phrase
            if found:
                terms.append(tuple(found))
        else:
            terms += [(w,) for w in found]
    return Query(text, tuple(dict.fromkeys(terms)))


def spans(text: str, query: Query) -> list[tuple[int, int]]:
    """Where ``query``'s terms are in ``text``: (start, end) offsets of the original characters, in order, for
    marking hits."""
    folded, where = fold_with_offsets(text)
    tokens = [(m.group(), m.start(), m.end()) for m in WORD.finditer(folded)]
    found = []
    for term in query.terms:
        n = len(term)
        for i in range(len(tokens) - n + 1):
            if all(tokens[i + k][0] == term[k] for k in range(n)):
                found.append((where[tokens[i][1]], where[tokens[i + n - 1][2] - 1] + 1))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(found):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def matches(text: str, query: Query) -> bool:
    """Every term of ``query`` is in ``text`` (a phrase: its words one after the other)."""
    tokens = words(text)
    joined = " " + " ".join(tokens) + " "
    return not query.empty and all(f" {' '.join(term)} " in joined for term in query.terms)


def clock(seconds: float) -> str:
    """``h:mm:ss`` (the hours always shown: times of one archive line up)."""
    s = int(max(0.0, seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
