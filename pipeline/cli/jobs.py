"""`transcribe` and `run`: a job from flags or a job file, run under the one stop policy (job/stop.py), and its
summary."""

from __future__ import annotations

import logging
import re
import sys
from dataclasses import replace
from pathlib import Path

import click

from ..facts import errors
from ..facts.errors import PodscribeError
from ..facts.events import events
from ..job.stop import StopPolicy, say
from ..outputs.export import FORMATS
from . import jobfile
from .flags import SectionedCommand, job_flags
from .group import main
from .settings import check, job_options, merge_settings, whisper_job_name

DEFAULT_JOB_DIR = "podscribe-manifests"
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def _log_to(path: Path | None) -> None:
    if not path:
        return
    try:
        handler = logging.FileHandler(path)
    except OSError as exc:
        raise click.UsageError(f"--log-file {path}: {exc.strerror or exc}") from exc
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    for terminal in root.handlers:  # the file gets INFO; the terminal keeps what it showed (WARNING, or -v's DEBUG)
        if terminal.level == logging.NOTSET:
            terminal.setLevel(root.level)
    logger = logging.getLogger("podscribe")
    logger.addHandler(handler)
    logger.setLevel(min(logging.INFO, logger.getEffectiveLevel()))  # -v's DEBUG stays DEBUG


def _execute(inputs: list[str], out_dir: Path, settings: dict, flags: dict) -> None:
    urls = [x for x in inputs if URL.match(x)]
    if urls:
        raise click.UsageError(
            f"{urls[0]} is a URL: podscribe transcribes local files, folders and glob patterns. Download it first "
            "(curl -O URL, yt-dlp -x URL), then give the file."
        )
    options = replace(job_options(out_dir, settings, flags), events=events())
    if flags.get("dry_run"):
        from ..job.dryrun import plan

        click.echo(plan(inputs, options, _workers(settings)))
        return
    _log_to(flags.get("log_file"))
    stopper = StopPolicy().install()
    try:
        from ..facts.runtime import quiet_libraries
        from ..job import Interrupted, engines

        quiet_libraries()
        if settings["engine"] == "ray":
            summary = engines.run_ray(inputs, options, settings["workers"], settings["address"])
        else:
            summary = engines.run_processes(inputs, engines.for_rank(options), settings["workers"] or 1, stopper.event)
    except (Interrupted, KeyboardInterrupt):
        say(f"stopped; everything decoded so far is saved in {out_dir}. Rerun the same command to resume.")
        sys.exit(stopper.exit_code)
    except PodscribeError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except ValueError as exc:  # options the loaded model refuses (a language for an English-only model)
        click.echo(f"Error: {exc}", err=True)
        sys.exit(errors.EXIT_USAGE)
    finally:
        stopper.restore()
    from ..job.dryrun import rate_key, record_run

    record_run(rate_key(options, _workers(settings)), summary.decoded, options.cache_dir)  # for --dry-run
    _report(summary)
    if not (summary.done or summary.already_done or summary.relabelled or summary.by_others or summary.elsewhere):
        sys.exit(errors.EXIT_NO_INPUT_SUCCEEDED)


def _workers(settings: dict) -> int:
    """How many workers a run of these settings starts (a Ray run without --workers: one per node, unknown here)."""
    return int(settings.get("workers") or 1)


def report_kept(kept) -> None:
    for edited, new in kept:
        if new is None:
            click.echo(f"  kept: {edited} (changed since podscribe wrote it; nothing new to write)", err=True)
        else:
            click.echo(f"  kept: {edited} (changed since podscribe wrote it); the new version is {new.name}", err=True)


def _report(summary) -> None:
    extra = [
        f"failed earlier (not retried): {summary.skipped_failed}" if summary.skipped_failed else "",
        f"copies of another input: {summary.copies}" if summary.copies else "",
        f"missing (earlier results kept): {len(summary.missing)}" if summary.missing else "",
        f"with warnings: {len(summary.warnings)}" if summary.warnings else "",
        f"finished by other workers: {summary.by_others}" if summary.by_others else "",
        f"given speaker labels: {summary.relabelled}" if summary.relabelled else "",
        f"being decoded by other workers: {summary.elsewhere}" if summary.elsewhere else "",
    ]
    click.echo(
        f"done: {summary.done}, failed: {summary.failed}, already done: {summary.already_done}"
        + "".join(f", {e}" for e in extra if e)
        + f"; {summary.audio_s:.0f} s of audio in {summary.wall_s:.0f} s"
    )
    for path, error in summary.failures:
        click.echo(f"  failed: {path}: {error}", err=True)
    for _path, problem in summary.missing:
        click.echo(f"  missing: {problem} (its results from an earlier run are kept)", err=True)
    for path, warning in summary.warnings:
        click.echo(f"  warning: {path}: {warning}", err=True)
    click.echo(f"manifests: {summary.out_dir.resolve()}")
    if summary.subtitles:
        click.echo(f"subtitles: {len(summary.subtitles)} files in {summary.subtitles[0].parent.resolve()}")
    elif summary.subtitles_left:
        click.echo("subtitles: other workers are still at work; the last one to finish writes them")
    if summary.site:
        click.echo(f"site: {summary.site / 'index.html'}")
    report_kept(summary.kept)


@main.command(cls=SectionedCommand)
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Job directory for the manifests, e.g. manifests/<job>. Rerunning into it resumes. Default: "
    f"{DEFAULT_JOB_DIR} inside --output-dir (or the current folder).",
)
@job_flags(show_defaults=True)
def transcribe(inputs, out_dir, **flags) -> None:
    """Transcribe audio/video files (mp3, m4a, opus, ogg, flac, wav, mp4, ...), folders or glob patterns.

    Writes Parquet manifests into --out: files/ (one row per input: status, error, timings),
    segments/ (start_s, end_s, text) and pieces/. Without --out it works like whisper: txt, vtt, srt, tsv and
    json files named after each input in the current folder (or -o), manifests in
    ./podscribe-manifests/<model>-<language>-<hash> (one job per configuration).
    Exits 1 when no input succeeded.
    """
    settings = merge_settings(flags, asked=_asked(flags))
    if out_dir is None:  # whisper mode: one job per configuration, in the output folder
        settings["output_dir"] = settings["output_dir"] or "."
        settings["outputs_named_only"] = True
        if flags.get("subtitles") is None:
            settings["subtitles"] = list(FORMATS)
        if settings["word_timestamps"] is None:
            settings["word_timestamps"] = True  # for the subtitles
        out_dir = whisper_job_dir(Path(settings["output_dir"]), settings)
    _execute(list(inputs), out_dir, settings, flags)


def whisper_job_dir(output_dir: Path, settings: dict) -> Path:
    """The folder of a whisper-mode job: its name from the resolved configuration, after the arguments are
    checked (resolving it loads torch); a folder an older version named for the same command is kept."""
    check(output_dir, settings)
    jobs = output_dir / DEFAULT_JOB_DIR
    resolved, spelled = jobs / whisper_job_name(settings), jobs / whisper_job_name(settings, resolved=False)
    return spelled if spelled.is_dir() and not resolved.exists() else resolved


def _asked(flags: dict) -> set[str]:
    """The flags the command line gave (click fills in the defaults it shows: those were not asked for)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT, ParameterSource.PROMPT)
    return {key for key in flags if ctx.get_parameter_source(key) in given}


@main.command("run", cls=SectionedCommand)
@click.argument("job_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Overrides the job file's `out` (default manifests/<name>).",
)
@job_flags(show_defaults=False)
def run_job(job_file, out_dir, **flags) -> None:
    """Run a job file (TOML; jobs/example.toml documents every key). Flags override the file."""
    try:
        job = jobfile.load(job_file)
        inputs = jobfile.inputs_of(job)
    except jobfile.JobFileError as exc:
        raise click.UsageError(str(exc)) from exc
    _execute(inputs, out_dir or jobfile.out_dir_of(job), merge_settings(flags, job, _asked(flags)), flags)
