"""The site's search index, split so that the index page loads none of it and a search loads only what it needs.

Episodes are kept in groups (``GROUP_EPISODES`` at most, in the order they joined the site, so adding episodes
rewrites only the last group's files). Each group has:

- ``search/g<N>/meta.js``: its episodes (by page name) and, per segment, the position of its first word;
- ``search/g<N>/<key>.js``: a positional index of the words that start with ``key`` (a letter or digit; other
  scripts by block): word -> the positions where it is said, delta-coded. Positions count the words of the
  group's segments one after the other, one position left empty between two segments, so a phrase is words at
  consecutive positions and never runs across two segments (as ``podscribe search`` matches it);

and each episode has ``search/t/<name>.js``: its segments' times, speakers and text, for showing hits. Above
the groups, ``search/words/<key>.js`` says which groups each word is in (``directory``): a search looks there
first and loads only the groups that have every word it asks for.

Every file is a script that hands its data to ``podscribe.put(name, data)``: a page opened from disk (file://)
cannot fetch() files beside it, but it can load scripts, and so can a page served over http. Words are cut and
folded by ``browse/text.py`` and, for the query, by ``assets/search.js`` the same way.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

from ..text import WORD, fold

GROUP_EPISODES = 48  # episodes in a search group: ~48 hours of a podcast archive, a few MB of index


def key_of(word: str) -> str:
    """The shard a folded word is in: its first character when it is an ASCII letter or digit, else ``u`` and its
    code point's block of 256 (hex)."""
    first = word[0]
    return first if first.isascii() and first.isalnum() else f"u{ord(first) >> 8:x}"


def script(name: str, data) -> bytes:
    """A script that puts ``data`` under ``name`` (JSON; ``<`` escaped, so no text ends the script early)."""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    return f"podscribe.put({json.dumps(name)},{body});\n".encode()


def deltas(values: list[int]) -> list[int]:
    out, last = [], 0
    for v in values:
        out.append(v - last)
        last = v
    return out


@dataclass
class GroupIndex:
    """One group's files, by path inside the site, and its words."""

    files: dict[str, bytes] = field(default_factory=dict)
    words: list[str] = field(default_factory=list)


def directory(vocabularies: dict[int, list[str]]) -> dict[str, bytes]:
    """``search/words/<key>.js``: each word -> the groups it is said in, so a search loads only the groups that
    have all its words (a rare word: one small script, then its few groups, not every group's shard)."""
    groups_of: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for number in sorted(vocabularies):
        for word in vocabularies[number]:
            groups_of[key_of(word)][word].append(number)
    return {f"search/words/{key}.js": script(f"words/{key}", dict(words)) for key, words in groups_of.items()}


def group_index(number: int, episodes: list[tuple[str, list[str]]]) -> GroupIndex:
    """The files of group ``number`` from its episodes: (page name, the texts of its segments in order)."""
    postings: dict[str, list[int]] = defaultdict(list)
    firsts: list[int] = []
    counts: list[int] = []
    position = 0
    for _, texts in episodes:
        counts.append(len(texts))
        for text in texts:
            firsts.append(position)
            for word in WORD.findall(fold(text)):
                postings[word].append(position)
                position += 1
            position += 1  # the gap between segments
    shards: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for word in sorted(postings):
        shards[key_of(word)][word] = deltas(postings[word])
    base = f"search/g{number}"
    out = GroupIndex(words=sorted(postings))
    out.files[f"{base}/words.json"] = json.dumps(out.words, ensure_ascii=False).encode()  # for the builder only
    meta = {
        "episodes": [name for name, _ in episodes],
        "segments": counts,
        "firsts": deltas(firsts),
        "keys": sorted(shards),
    }
    out.files[f"{base}/meta.js"] = script(f"g{number}/meta", meta)
    for key, words in shards.items():
        out.files[f"{base}/{key}.js"] = script(f"g{number}/{key}", words)
    return out


def episode_text(name: str, segments: list[dict], speakers: list[str]) -> bytes:
    """``search/t/<name>.js``: per segment [start in hundredths of a second (as the page's ``data-t``), speaker
    (index in ``speakers``, -1: none), text]."""
    index = {s: i for i, s in enumerate(speakers)}
    rows = [[round(s["start_s"] * 100), index.get(s.get("speaker"), -1), s["text"].strip()] for s in segments]
    return script(f"t/{name}", rows)
