"""`podscribe search`: the segments of one or more jobs that say the words or phrases asked for.

The whole archive is filtered with pyarrow compute (decision 0038: measured against DuckDB on a 1,000-hour
archive) over each job's folded text, kept in one table per job (``cache.py``): the longest query word as a
substring first, then one RE2 pattern per term, a term's words bounded by anything that is not a letter or a
digit, as ``text.py`` cuts words (``matching``). Only the hits shown are then read from their episodes' own
tables and marked, in Python, in their original text.

Reads the manifests only: no model, no torch (start-up is the CLI's imports and pyarrow's).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..facts.errors import UsageProblem
from ..outputs.speaker_names import named
from ..storage.manifest import UNREADABLE, JobDir
from . import text as textmod
from .archive import Archive, Episode, mark_unreadable, open_archive, searchable
from .sites import Pages

BOUND = r"[^\p{L}\p{N}]"  # what ends a word (text.WORD's complement)
PREFILTER_CHARS = 4  # a word this long is looked for as a plain substring before any pattern runs


@dataclass
class SearchOptions:
    query: str
    speaker: str | None = None  # a name or a label (Speaker 2), any case
    file_glob: str | None = None  # matched against each episode's path and its file name
    limit: int = 20  # hits shown (0: all)
    speaker_names: str | None = None  # names instead of the jobs' own, "Lena,Walter"
    site: Path | None = None  # a site to link to (else the sites the jobs record)


@dataclass
class Hit:
    episode: Episode
    segment: int
    start_s: float
    end_s: float
    speaker: str | None  # the name, where the job has one, else the label
    text: str
    marks: list[tuple[int, int]]  # where the terms are in ``text``
    page: str | None = None  # the site's page at this moment, as a file URL (None: no site)

    def marked(self, before: str, after: str) -> str:
        out, at = [], 0
        for start, end in self.marks:
            out += [self.text[at:start], before, self.text[start:end], after]
            at = end
        return "".join(out + [self.text[at:]]).strip()

    def as_dict(self) -> dict:
        return {
            "episode": self.episode.title,
            "path": self.episode.path,
            "job": str(self.episode.job),
            "file_id": self.episode.file_id,
            "date": self.episode.date,
            "segment": self.segment,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "time": textmod.clock(self.start_s),
            "speaker": self.speaker,
            "text": self.text.strip(),
            "marks": [[start, end] for start, end in self.marks],
            "page": self.page,
        }


@dataclass
class SearchResult:
    query: textmod.Query
    hits: list[Hit]  # the first ``limit``, by episode (as listed) and time
    total: int  # segments that match
    episodes: int  # episodes they are in
    searched: int  # episodes searched
    problems: list[str] = field(default_factory=list)  # tables that could not be read (their episodes left out)


def pattern(term: tuple[str, ...], ascii_only: bool = False) -> str:
    """RE2 pattern of one term over folded text: its words one after the other, each a whole word. ``ascii_only``:
    with ASCII classes (ten times faster in RE2; exact on ASCII text, and on any text it matches at least where the
    exact pattern does)."""
    bound = "[^a-z0-9]" if ascii_only else BOUND
    return f"(?:^|{bound})" + f"{bound}+".join(re.escape(w) for w in term) + f"(?:{bound}|$)"


def matching(table: pa.Table, query: textmod.Query) -> pa.Table:
    """The rows of ``table`` (with a ``folded`` column: ``cache.folded``) whose text has every term of ``query``.

    Cheapest first: the longest word as a substring, when it is long enough to be rare (a short one keeps most rows,
    and copying them costs more than the patterns save), then each term's pattern with ASCII classes, and the exact
    pattern only on the rows left that are not ASCII."""
    longest = max((w for term in query.terms for w in term), key=len)
    if len(longest) >= PREFILTER_CHARS:
        table = table.filter(pc.match_substring(table.column("folded"), longest))
    if not table.num_rows:
        return table
    texts = table.column("folded").combine_chunks()
    other = pc.invert(pc.string_is_ascii(texts))
    mask = None
    for term in query.terms:
        found = pc.match_substring_regex(texts, pattern=pattern(term, ascii_only=True))
        if pc.any(other).as_py():
            exact = pc.match_substring_regex(pc.filter(texts, other), pattern=pattern(term))
            found = pc.replace_with_mask(found, other, exact)
        mask = found if mask is None else pc.and_(mask, found)
    return table.filter(mask)


def search(job_dirs: list[Path], options: SearchOptions) -> SearchResult:
    query = textmod.parse(options.query)
    if query.empty:
        raise UsageProblem(
            f"the query {options.query!r} has no words to search for (letters or digits; a phrase in quotes)"
        )
    archive = open_archive(job_dirs, options.speaker_names)
    episodes = [e for e in archive.episodes if e.status == "done" and _file_matches(e, options.file_glob)]
    table = searchable(archive, episodes)
    found = matching(table, query).select(["file_id", "segment", "start_s", "end_s", "speaker"]).to_pydict()
    rows = [dict(zip(found, values)) for values in zip(*found.values())]
    by_id = {e.file_id: e for e in episodes}
    if options.speaker:
        wanted = options.speaker.strip().casefold()
        rows = [r for r in rows if r["speaker"] and wanted in _said_by(r["speaker"], by_id[r["file_id"]])]
    order = {e.file_id: i for i, e in enumerate(episodes)}
    rows.sort(key=lambda r: (order[r["file_id"]], r["start_s"], r["segment"]))
    total, in_episodes = len(rows), len({r["file_id"] for r in rows})
    shown = rows[: options.limit] if options.limit else rows
    texts = _texts(archive, [by_id[fid] for fid in dict.fromkeys(r["file_id"] for r in shown)])
    pages = Pages(archive, options.site)
    hits = []
    for row in shown:
        episode = by_id[row["file_id"]]
        said = texts.get((row["file_id"], row["segment"]))
        if said is None:  # its table changed or went since the cache was read: left out
            continue
        hits.append(
            Hit(
                episode=episode,
                segment=row["segment"],
                start_s=row["start_s"],
                end_s=row["end_s"],
                speaker=named(row["speaker"], episode.names),
                text=said,
                marks=textmod.spans(said, query),
                page=pages.url(episode, row["start_s"]),
            )
        )
    searched = sum(1 for e in episodes if e.status == "done")
    return SearchResult(query, hits, total, in_episodes, searched, archive.problems)


def _texts(archive: Archive, episodes: list[Episode]) -> dict[tuple[str, int], str]:
    """The original text of every segment of the episodes whose hits are shown (their own tables)."""
    out = {}
    for e in episodes:
        path = JobDir(e.job).table_path("segments", e.file_id)
        try:
            # ParquetFile, not read_table: read_table imports pyarrow.dataset (and with it pandas: 0.5 s of a start)
            table = pq.ParquetFile(path, page_checksum_verification=True).read(columns=["segment", "text"])
        except UNREADABLE as exc:
            mark_unreadable(archive, e, f"its segments table cannot be read ({str(exc).splitlines()[0]}): {path}")
            continue
        out.update(
            ((e.file_id, n), t) for n, t in zip(table.column("segment").to_pylist(), table.column("text").to_pylist())
        )
    return out


def _file_matches(episode: Episode, glob: str | None) -> bool:
    if not glob:
        return True
    paths = episode.row.get("paths") or [episode.path]
    return any(fnmatch.fnmatch(p, glob) or fnmatch.fnmatch(Path(p).name, glob) for p in paths)


def _said_by(label: str, episode: Episode) -> tuple[str, str]:
    """What ``--speaker`` may give for a segment's speaker: its label or its name, folded to lower case."""
    return label.casefold(), (named(label, episode.names) or "").casefold()
