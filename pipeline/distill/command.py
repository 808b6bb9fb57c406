"""The ``podscribe distill`` command (attached to the CLI in ``pipeline/cli/tools.py``): arguments checked at once,
torch and transformers imported only when the run starts."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..facts.errors import EXIT_USAGE, PodscribeError
from ..facts.events import events
from .options import DistillOptions


def _vocab(value: str) -> int | None:
    if value == "full":
        return None
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter("a count of text tokens, or 'full'") from None


def _option(flag: str, help: str | None = None):
    """``flag`` with ``DistillOptions``' default for the field of the same name (and its type), shown in --help."""
    default = getattr(DistillOptions, flag.removeprefix("--").replace("-", "_"))
    return click.option(flag, type=type(default), default=default, show_default=True, help=help)


@click.command("distill")
@click.argument("sources", nargs=-1, required=True)
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path), help="The draft's directory.")
@_option("--main", "The main model the draft is for.")
@_option("--layers", "Decoder layers of the draft (the main decoder's first and last, then evenly between).")
@click.option(
    "--vocab",
    default="full",
    show_default=True,
    help="Text tokens the draft may propose (the most used in its transcripts; every special and "
    "timestamp token besides), or 'full'.",
)
@click.option("--steps", type=int, default=None, help="Optimizer steps (default: from --epochs).")
@_option("--epochs")
@_option("--batch-size")
@_option("--grad-accum", "Micro-batches per step (gradient accumulation).")
@_option("--lr")
@_option("--eval-every", "Steps between evaluations (acceptance on held-out files) and checkpoints.")
@click.option("--checkpoint-every", type=int, default=None, help="Steps between checkpoints (default: --eval-every).")
@_option("--seed")
@_option("--holdout", "Share of the files held out for evaluation.")
@click.option("--max-pieces", type=int, default=None, help="Label at most this many pieces.")
@click.option("--language", default=None, help="Language of the audio (default: detected per piece).")
@_option("--device")
@_option("--compute-type", "The main model's, for labelling.")
@click.option("--mixed-precision", type=click.Choice(["no", "bf16"]), default="no", show_default=True)
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def distill_command(sources, out_dir, vocab, checkpoint_every, **flags) -> None:
    """Train a small draft for --main on SOURCEs (finished job dirs, audio files/folders, dataset dirs).

    The draft is a Transformers model directory: use it with --assistant DIR."""
    try:
        options = DistillOptions(vocab=_vocab(vocab), checkpoint_every=checkpoint_every, **flags)
    except ValueError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    from ..facts.runtime import quiet_libraries
    from .train import distill, report

    quiet_libraries()  # transformers' weight-loading bars and notices, as a transcription has none
    try:
        result = distill(list(sources), out_dir, options, echo=lambda m: click.echo(m, err=True), events=events())
    except PodscribeError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    click.echo(report(result))
