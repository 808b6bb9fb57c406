"""The command group: whisper's spellings of flags (``--output_format``, ``--verbose True``) read as podscribe's,
and the -v/--verbose option every command takes."""

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


def whisper_verbose(args: list[str]) -> list[str]:
    """openai-whisper's ``--verbose True`` / ``--verbose False`` (and ``=True``) as podscribe's flag: ``-v`` for
    True, nothing for False (anywhere before ``--``; without the value it is the flag as ever)."""
    out, rest = [], list(args)
    while rest:
        token = rest.pop(0)
        if token == "--":
            return out + [token] + rest
        flag, eq, value = token.partition("=")
        if normalize_token(flag) != "--verbose":
            out.append(token)
            continue
        if not eq and rest and rest[0].lower() in ("true", "false"):
            value = rest.pop(0)
        if eq and value.lower() not in ("true", "false"):
            raise click.UsageError(f"{token}: --verbose takes True or False (or no value)")
        if not value or value.lower() == "true":
            out.append("--verbose")
    return out


class WhisperArgsGroup(click.Group):
    """The command group, reading whisper's ``--verbose True|False`` before click parses the arguments."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, whisper_verbose(args))


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
