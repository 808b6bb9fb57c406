"""The click options of ``transcribe``, ``run`` and ``export``, generated from the option table (``options.py``),
and the sectioned --help that lists them."""

from __future__ import annotations

from pathlib import Path

import click

from ..job.options import INPUTS, OPTIONS, SECTIONS, Option, default, help_text
from .group import verbose_option


def click_type(option: Option):
    if option.choices:
        return click.Choice(option.choices)
    if option.kind == "folder":
        return click.Path(file_okay=False, path_type=Path)
    if option.kind == "file":
        return click.Path(dir_okay=False, writable=True, path_type=Path)
    if option.kind in ("int", "float"):
        checked = option.click_range if option.click_range is not None else option.kind == "int"
        if option.range and checked:  # else validate.py checks it, with the job file's values
            kind = click.IntRange if option.kind == "int" else click.FloatRange
            return kind(option.range.low, option.range.high, min_open=option.range.low_open)
        return int if option.kind == "int" else float
    return None  # text; a comma list; a --x/--no-x switch


def click_option(option: Option, show: bool):
    """``show``: click fills in the default and --help shows it; otherwise a flag not given is None, so that a job
    file's value (``run``) or the built-in default wins."""
    if option.kind == "flag":
        return click.option(*option.flags, option.key, is_flag=True, help=option.help)
    return click.option(
        *option.flags,
        option.key,
        type=click_type(option),
        default=default(option) if show else None,
        show_default=show,
        help=help_text(option) or None,
    )


def apply(options: list, f):
    for option in reversed(options):
        f = option(f)
    return f


def job_flags(show_defaults: bool):
    """The options that shape a job, shared by `transcribe` (``show_defaults``) and `run` (a job file's values win
    over the defaults, so its flags have none)."""
    options = [click_option(o, show_defaults and o.shown) for o in OPTIONS if o.flags]
    options += [click.option(*names, hidden=True, expose_value=False, callback=_unsupported) for names in UNSUPPORTED]
    return lambda f: verbose_option(apply(options, f))


def cue_flags(f):
    """--max-line-chars, --max-cps, ... of `export`, their defaults shown."""
    return apply([click_option(o, o.kind != "text") for o in OPTIONS if o.owner and o.owner.startswith("cues.")], f)


# --help in sections, model and decoding first, cue layout late (each option by its parameter name); --out is each
# command's own.
HELP_SECTIONS = {title: tuple(o.key for o in OPTIONS if o.section == title and o.flags) for title in SECTIONS}
HELP_SECTIONS[INPUTS] = ("out_dir", *HELP_SECTIONS[INPUTS], "verbose")


class SectionedCommand(click.Command):
    """A command whose --help lists its options in HELP_SECTIONS' order, one section each."""

    def format_options(self, ctx, formatter) -> None:
        records = {p.name: p.get_help_record(ctx) for p in self.get_params(ctx) if isinstance(p, click.Option)}
        records = {name: record for name, record in records.items() if record}
        placed: set[str] = set()
        for title, names in HELP_SECTIONS.items():
            rows = [records[n] for n in names if n in records]
            placed.update(n for n in names if n in records)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [record for name, record in records.items() if name not in placed]
        if rest:
            with formatter.section("Other"):
                formatter.write_dl(rest)


# Decoding flags of openai-whisper / faster-whisper that podscribe has no equivalent for: a clear answer, not
# click's "did you mean --batch-size?" (a different meaning).
UNSUPPORTED = [
    tuple(dict.fromkeys((f"--{name}", f"--{name.replace('_', '-')}")))
    for name in (
        "beam_size",
        "best_of",
        "temperature",
        "patience",
        "length_penalty",
        "temperature_increment_on_fallback",
        "condition_on_previous_text",
        "suppress_tokens",
        "sampling_temperature",
        "num_beams",
    )
]


def _unsupported(ctx, param, value):
    if value is not None:
        raise click.UsageError(
            f"{param.opts[0]} is not supported: podscribe decodes greedily, so that its output is token for token "
            "the main model's with or without an assistant (speculative decoding); pieces that fail Whisper's checks "
            "are decoded again with beam search (--fallback-beams). Leave it out.",
            ctx,
        )
    return value
