"""The site's HTML: the index of episodes and one page per episode, as strings.

Everything that comes from a transcript, a tag or a path is escaped where it lands: ``esc`` for text and
attribute values (always quoted), ``data_json`` for the catalogue the index page's script reads (``<`` escaped, so
a transcript saying ``</script>`` stays text). The pages load only their own files (``assets/``, the episode's
downloads, its audio by a relative link): nothing from another host.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from urllib.parse import quote

from ..text import clock

FLAG_NAMES = {
    "low_logprob": "low confidence",
    "no_speech": "maybe no speech",
    "loop": "repeats collapsed",
    "language": "another language",
}


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def data_json(data) -> str:
    """JSON for a ``<script type="application/json">`` block: nothing in it can end the block."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def url_path(path: str) -> str:
    """A relative file path as a URL path (each part percent-encoded: spaces, ``#``, ``?``)."""
    return "/".join(quote(part) for part in path.split("/"))


def duration(seconds: float | None) -> str:
    return clock(seconds) if seconds is not None else ""


def head(title: str, root: str) -> str:
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="color-scheme" content="light dark">\n'
        '<link rel="icon" href="data:,">\n'  # no request for /favicon.ico
        f"<title>{esc(title)}</title>\n"
        f'<link rel="stylesheet" href="{root}assets/site.css">\n</head>\n'
    )


@dataclass
class EpisodePage:
    """What an episode page shows, besides its segments."""

    title: str
    site_title: str
    date: str | None
    duration_s: float | None
    language: str | None
    speakers: list[str]  # display names, in order of first appearance
    audio: str | None  # URL of the audio, relative to the page (None: none known)
    audio_note: str | None  # a word about it (not found when the site was built)
    downloads: list[tuple[str, str]]  # (label, file name beside the page)
    edited: list[str] = field(default_factory=list)  # downloads a person edited (labels)
    source: str = ""  # the input's path, as the job has it


def episode_page(page: EpisodePage, segments: list[dict], names) -> str:
    """An episode's page: player, downloads, the transcript in speaker turns with times; each word and segment
    carries its start (``data-t``) for the page's script; flagged segments are marked."""
    flagged = sum(1 for s in segments if s.get("flags"))
    meta = [x for x in (page.date and page.date[:10], duration(page.duration_s), page.language) if x]
    if page.speakers:
        meta.append(", ".join(page.speakers))
    out = [head(f"{page.title} · {page.site_title}", "../"), '<body class="episode">\n']
    out.append('<a class="skip" href="#transcript">Skip to the transcript</a>\n<header>\n')
    out.append(f'<nav><a href="../index.html">{esc(page.site_title)}: all episodes</a></nav>\n')
    out.append(f'<h1>{esc(page.title)}</h1>\n<p class="meta">{" · ".join(esc(m) for m in meta)}</p>\n')
    if page.audio:
        out.append(f'<audio id="player" controls preload="metadata" src="{esc(page.audio)}"></audio>\n')
    else:
        out.append('<p class="note">No player: the audio file was not found.</p>\n')
    if page.audio_note:
        out.append(f'<p class="note">{esc(page.audio_note)}</p>\n')
    links = " ".join(
        f'<a href="{esc(url_path(file))}" download>{esc(label)}</a>'
        + (' <span class="edited">(edited by a person)</span>' if label in page.edited else "")
        for label, file in page.downloads
    )
    out.append(f'<p class="downloads">Transcript: {links}</p>\n')
    if flagged:
        out.append(
            '<p class="tools"><label><input type="checkbox" id="only-flagged"> '
            f"Only the {flagged} segment{'s' * (flagged > 1)} to check</label></p>\n"
        )
    out.append(f'<p class="source">{esc(page.source)}</p>\n</header>\n')
    out.append('<main id="transcript" tabindex="-1">\n')
    opened, turn = False, None
    for s in segments:
        speaker = s.get("speaker")
        if not opened or speaker != turn:
            out.append("</section>\n" if opened else "")
            opened, turn = True, speaker
            out.append('<section class="turn">\n')
            if speaker:
                out.append(f'<h2 class="who">{esc(names(speaker))}</h2>\n')
        out.append(segment_html(s))
    if opened:
        out.append("</section>\n")
    else:
        out.append('<p class="note">No speech was transcribed in this episode.</p>\n')
    out.append('</main>\n<script src="../assets/episode.js"></script>\n</body>\n</html>\n')
    return "".join(out)


def segment_html(s: dict) -> str:
    start = s["start_s"]
    flags = s.get("flags") or []
    cls = "seg flagged" if flags else "seg"
    attrs = f'class="{cls}" id="s{s["segment"]}" data-t="{start:.2f}" data-e="{s["end_s"]:.2f}"'
    at = f'<a class="at" href="#t={start:.2f}">{clock(start)}</a> '
    words = s.get("words") or []
    if words:
        body = " ".join(f'<span data-t="{w["start_s"]:.2f}">{esc(w["word"].strip())}</span>' for w in words)
    else:
        body = f"<span>{esc(s['text'].strip())}</span>"
    mark = ""
    if flags:
        said = ", ".join(FLAG_NAMES.get(f, f) for f in flags)
        mark = f' <span class="flag" title="{esc(", ".join(flags))}">check: {esc(said)}</span>'
    return f"<p {attrs}>{at}{body}{mark}</p>\n"


@dataclass
class IndexRow:
    title: str
    page: str | None  # e/<name>.html (None: no page: failed, pending, unreadable)
    date: str | None
    duration_s: float | None
    speakers: list[str]
    flagged: int
    status: str  # done / failed / pending / unreadable
    note: str | None  # why it failed, or cannot be read
    path: str


def index_page(site_title: str, rows: list[IndexRow], catalog: dict, summary: str) -> str:
    """The index: the search box (search.js loads the index only when a search starts), the episodes' table
    (index.js sorts it by any column), and the catalogue the search reads."""
    out = [head(site_title, ""), '<body class="index">\n<a class="skip" href="#q">Skip to search</a>\n']
    out.append(f'<header>\n<h1>{esc(site_title)}</h1>\n<p class="meta">{esc(summary)}</p>\n</header>\n<main>\n')
    out.append(
        '<form role="search" id="search" onsubmit="return false">\n'
        '<label for="q">Search every episode</label>\n'
        '<input id="q" type="search" autocomplete="off" spellcheck="false" '
        'placeholder="words, or &quot;a phrase&quot;" aria-describedby="search-status">\n'
        '<p id="search-status" role="status" aria-live="polite"></p>\n</form>\n'
        '<ol id="hits" class="hits"></ol>\n<p id="more-hits" hidden><button type="button">More hits</button></p>\n'
    )
    out.append('<table id="episodes">\n<caption>Episodes</caption>\n<thead><tr>')
    for key, label, kind in (
        ("title", "Title", "text"),
        ("date", "Date", "text"),
        ("duration", "Duration", "number"),
        ("speakers", "Speakers", "text"),
        ("flagged", "To check", "number"),
        ("status", "Status", "text"),
    ):
        out.append(f'<th scope="col"><button type="button" data-key="{key}" data-kind="{kind}">{label}</button></th>')
    out.append("</tr></thead>\n<tbody>\n")
    for r in rows:
        title = f'<a href="{esc(url_path(r.page))}">{esc(r.title)}</a>' if r.page else esc(r.title)
        note = f'<br><small class="note">{esc(r.note)}</small>' if r.note else ""
        out.append(
            f'<tr data-status="{esc(r.status)}">'
            f'<td data-v="{esc(r.title.casefold())}" title="{esc(r.path)}">{title}{note}</td>'
            f'<td data-v="{esc(r.date or "")}">{esc((r.date or "")[:10])}</td>'
            f'<td data-v="{r.duration_s or 0:.1f}">{duration(r.duration_s)}</td>'
            f'<td data-v="{esc(", ".join(r.speakers).casefold())}">{esc(", ".join(r.speakers))}</td>'
            f'<td data-v="{r.flagged}">{r.flagged or ""}</td>'
            f'<td data-v="{esc(r.status)}"><span class="status {esc(r.status)}">{esc(r.status)}</span></td></tr>\n'
        )
    out.append("</tbody>\n</table>\n</main>\n")
    out.append(f'<script type="application/json" id="catalog">{data_json(catalog)}</script>\n')
    out.append('<script src="assets/search.js"></script>\n<script src="assets/index.js"></script>\n</body>\n</html>\n')
    return "".join(out)
