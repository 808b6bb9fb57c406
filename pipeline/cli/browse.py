"""`search` and `site`: reading an archive's transcripts (pipeline/browse/). Neither loads a model nor imports
torch: they read the manifests only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..facts import errors
from ..facts.errors import PodscribeError
from .group import main, verbose_option

JOB_DIRS = click.argument("job_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
SPEAKER_NAMES = click.option(
    "--speaker-names",
    default=None,
    help='Names for Speaker 1, 2, ... (e.g. "Lena,Walter"), instead of those the job was given.',
)


def _fail(exc: PodscribeError):
    click.echo(f"Error: {exc}", err=True)
    sys.exit(exc.exit_code)


@main.command()
@click.argument("query")
@JOB_DIRS
@click.option("--speaker", default=None, help="Only what this speaker says: a name or a label (Speaker 2), any case.")
@click.option("--file", "file_glob", default=None, help="Only episodes whose path or file name matches this glob.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=0), help="Hits shown (0: all).")
@click.option("--json", "as_json", is_flag=True, help="The hits as one JSON object, for scripts.")
@click.option(
    "--site",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Link hits to this site's pages (default: the sites `podscribe site` built from the jobs).",
)
@SPEAKER_NAMES
@verbose_option
def search(query, job_dirs, speaker, file_glob, limit, as_json, site, speaker_names) -> None:
    """Segments that say QUERY in the transcripts of JOB_DIRS: words (each somewhere in the segment) or a
    "quoted phrase" (its words in order), any case and accents: podscribe search '"climate change" tax' job/.

    Each hit: episode, h:mm:ss, speaker, the segment with the words marked, and its moment on the site's page
    when one was built (podscribe site). Exit 5 when a table could not be read (the rest is searched)."""
    from ..browse.query import SearchOptions
    from ..browse.query import search as run_search

    options = SearchOptions(query, speaker, file_glob, limit, speaker_names, site)
    try:
        result = run_search(list(job_dirs), options)
    except PodscribeError as exc:
        _fail(exc)
    if as_json:
        doc = {
            "query": query,
            "terms": [list(t) for t in result.query.terms],
            "total": result.total,
            "episodes": result.episodes,
            "searched": result.searched,
            "hits": [h.as_dict() for h in result.hits],
            "problems": result.problems,
        }
        click.echo(json.dumps(doc, ensure_ascii=False, indent=1))
    else:
        _print_hits(result)
    for problem in result.problems:
        click.echo(f"  unreadable: {problem}", err=True)
    if result.problems:
        sys.exit(errors.EXIT_DAMAGED_STATE)


def _print_hits(result) -> None:
    color = sys.stdout.isatty()
    before, after = ("\x1b[1;7m", "\x1b[0m") if color else ("[", "]")
    episode = None
    for hit in result.hits:
        if hit.episode is not episode:
            episode = hit.episode
            date = f" ({episode.date[:10]})" if episode.date else ""
            click.echo(f"{episode.title}{date}  {episode.path}")
        who = f"  {hit.speaker}:" if hit.speaker else ""
        click.echo(f"  {_clock(hit.start_s)}{who} {hit.marked(before, after)}")
        if hit.page:
            click.echo(f"           {hit.page}")
    shown = len(result.hits)
    more = f", {shown} shown (--limit)" if shown < result.total else ""
    click.echo(
        f"{result.total} segment{'s' * (result.total != 1)} in {result.episodes} of {result.searched} "
        f"episode{'s' * (result.searched != 1)}{more}",
    )


def _clock(seconds: float) -> str:
    from ..browse.text import clock

    return clock(seconds)


@main.command()
@JOB_DIRS
@click.option(
    "-o",
    "--output-dir",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="The site's folder (made if new; updated where it changed if it is a site already).",
)
@click.option("--title", default=None, help="The site's title (default: the job dirs' names).")
@click.option(
    "--copy-audio",
    is_flag=True,
    help="Put an Opus copy of each episode's audio beside its page (for a site served from elsewhere); "
    "without it the player links to the audio where the job read it.",
)
@SPEAKER_NAMES
@verbose_option
def site(job_dirs, out, title, copy_audio, speaker_names) -> None:
    """A static site of JOB_DIRS' transcripts in OUT: an index of episodes, a page per episode (player, transcript
    in speaker turns, click to play, downloads) and a search of the whole archive. Opens from disk or any plain
    web server; nothing is loaded from another host.

    Built as a whole the first time (in a temporary folder, then moved into place); later builds change only what
    changed, and never a file a person edited. Exit 5 when an episode's tables could not be read (it is listed as
    unreadable; the rest is built)."""
    from ..browse.site import SiteOptions, build_site

    try:
        result = build_site(list(job_dirs), SiteOptions(out, title, copy_audio, speaker_names))
    except PodscribeError as exc:
        _fail(exc)
    click.echo(
        f"site: {result.out}/index.html ({result.episodes} episode{'s' * (result.episodes != 1)}; {result.pages} "
        f"pages and {result.groups} search groups made in this build, {result.wall_s:.1f} s)"
    )
    for kept, new in result.kept:
        click.echo(f"  kept (changed by a person): {kept}" + (f"; new version: {new}" if new else ""), err=True)
    for problem in result.problems:  # the unreadable episodes among them
        click.echo(f"  unreadable: {problem}", err=True)
    if result.unreadable or result.problems:
        sys.exit(errors.EXIT_DAMAGED_STATE)
