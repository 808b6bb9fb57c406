"""The ``podscribe distill`` command (attached to the CLI in ``pipeline/cli.py``): arguments checked at once,
torch and transformers imported only when the run starts."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import EXIT_USAGE, PodscribeError
from .options import DistillOptions


def _vocab(value: str) -> int | None:
    if value == "full":
        return None
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter("a count of text tokens, or 'full'") from None


@click.command("distill")
@click.argument("sources", nargs=-1, required=True)
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path), help="The draft's directory.")
@click.option("--main", default=DistillOptions.main, show_default=True, help="The main model the draft is for.")
@click.option(
    "--layers",
    default=DistillOptions.layers,
    show_default=True,
    type=int,
    help="Decoder layers of the draft (the main decoder's first and last, then evenly between).",
)
@click.option(
    "--vocab",
    default="full",
    show_default=True,
    help="Text tokens the draft may propose (the most used in its transcripts; every special and "
    "timestamp token besides), or 'full'.",
)
@click.option("--steps", type=int, default=None, help="Optimizer steps (default: from --epochs).")
@click.option("--epochs", type=float, default=DistillOptions.epochs, show_default=True)
@click.option("--batch-size", type=int, default=DistillOptions.batch_size, show_default=True)
@click.option(
    "--grad-accum",
    type=int,
    default=DistillOptions.grad_accum,
    show_default=True,
    help="Micro-batches per step (gradient accumulation).",
)
@click.option("--lr", type=float, default=DistillOptions.lr, show_default=True)
@click.option(
    "--eval-every",
    type=int,
    default=DistillOptions.eval_every,
    show_default=True,
    help="Steps between evaluations (acceptance on held-out files) and checkpoints.",
)
@click.option("--checkpoint-every", type=int, default=None, help="Steps between checkpoints (default: --eval-every).")
@click.option("--seed", type=int, default=DistillOptions.seed, show_default=True)
@click.option(
    "--holdout",
    type=float,
    default=DistillOptions.holdout,
    show_default=True,
    help="Share of the files held out for evaluation.",
)
@click.option("--max-pieces", type=int, default=None, help="Label at most this many pieces.")
@click.option("--language", default=None, help="Language of the audio (default: detected per piece).")
@click.option("--device", default="auto", show_default=True)
@click.option("--compute-type", default="auto", show_default=True, help="The main model's, for labelling.")
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
    from .train import distill, report

    try:
        result = distill(list(sources), out_dir, options, echo=lambda m: click.echo(m, err=True))
    except PodscribeError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    click.echo(report(result))
