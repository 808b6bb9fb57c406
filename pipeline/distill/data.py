"""Training data for a draft: sources → the main model's pseudo-labels, with its encoder output cached.

A SOURCE is one of
- a finished job dir: its files and pieces tables give the pieces exactly as transcription cut and gated
  them (language included). The pieces table keeps no token ids (only counts; token ids live in the
  checkpoints of unfinished files), so each piece is decoded once more with the main model alone —
  the draft must learn the main model's own greedy tokens, which these are;
- audio files or folders: cut with the cutter and gated with the VAD and energy rules of transcription
  (``Transcriber``'s gate), the language detected per piece, then decoded with the main model;
- a dataset on disk that ``datasets`` loads (a folder of Parquet files, or an audiofolder), one audio per
  row; rows are files for the held-out split.

Per piece the main model's first pass is what is learnt (the prompt, its greedy tokens, end-of-text when it
ended on one) with the main model's top-k log-probabilities at each position (the KL target), and its
encoder output is cached on disk (float16): it is frozen, and every epoch reads it again. Files, never
pieces, are held out, so no held-out piece has a neighbour in training.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ..audio.media import AudioError
from ..facts.errors import UsageProblem

log = logging.getLogger("podscribe")
LABEL_BATCH = 4


class DistillInputError(UsageProblem):
    """A SOURCE that cannot give training data (exit 2); nothing is written."""


@dataclass
class Example:
    file: str  # the file (job file id, audio path, dataset row) the piece belongs to: the split's unit
    piece: int
    prompt: list[int]
    tokens: list[int]  # the main model's first-pass tokens, end-of-text last when it ended on one
    cache: str  # file name of its cached encoder output and teacher targets


@dataclass
class Unit:
    """One file's pieces to label: (index, samples, language or None) — produced lazily."""

    key: str
    pieces: object  # a callable returning an iterator of (index, samples, language)


# -- sources ---------------------------------------------------------------------------------------------------


def _is_job_dir(path: Path) -> bool:
    return path.is_dir() and any((path / n).exists() for n in ("job.json", "files", "pieces", "partial"))


def _is_dataset_dir(path: Path) -> bool:
    """Parquet files, or an audiofolder (a metadata.csv whose header names ``file_name``)."""
    if not path.is_dir():
        return False
    if any(path.glob("*.parquet")) or any(path.glob("data/*.parquet")):
        return True
    meta = path / "metadata.csv"
    if not meta.is_file():
        return False
    with open(meta, encoding="utf-8", errors="replace") as f:
        return "file_name" in f.readline().split(",")


def inspect_sources(sources: list[str], main_sha256: str) -> list[Unit]:
    """The files to label, checked before anything is loaded or written: each SOURCE exists and is a finished
    job dir made with this main model, audio, or a dataset dir. DistillInputError otherwise."""
    from ..audio.media import AUDIO_EXTENSIONS

    units: list[Unit] = []
    if not sources:
        raise DistillInputError("give at least one SOURCE: a finished job dir, audio files/folders, or a dataset dir")
    for raw in sources:
        path = Path(raw).expanduser().absolute()
        if not path.exists():
            raise DistillInputError(f"SOURCE {raw!r} does not exist")
        if _is_job_dir(path):
            units += _job_units(path, main_sha256)
        elif _is_dataset_dir(path):
            units += _dataset_units(path)
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_EXTENSIONS)
            if not found:
                raise DistillInputError(f"SOURCE {raw!r} is an empty folder: no audio, not a job dir, not a dataset")
            units += [_audio_unit(p) for p in found]
        else:
            units.append(_audio_unit(path))
    return units


def _audio_unit(path: Path) -> Unit:
    return Unit(str(path), _file_pieces(path))


def _job_units(path: Path, main_sha256: str) -> list[Unit]:
    import pyarrow.dataset as ds

    from ..storage.manifest import JobDir

    job = JobDir(path)
    record = job.read_job()
    if any((path / "partial").rglob("*.parquet")):
        raise DistillInputError(f"job dir {path} is unfinished (files still in partial/): finish the job first")
    rows = job.file_rows() if (path / "files").is_dir() else []
    if record is None or not rows:
        raise DistillInputError(f"job dir {path} holds no finished files: run the job first")
    done_paths = {p for r in rows for p in (r.get("paths") or [r["path"]])}
    missing = [
        i for i in record.get("inputs", []) if not Path(i).is_dir() and str(Path(i).absolute()) not in done_paths
    ]
    unfinished = [r["path"] for r in rows if r["status"] not in ("done", "failed")]
    if unfinished or missing:
        raise DistillInputError(f"job dir {path} is unfinished ({(unfinished + missing)[0]} has no result yet)")
    done = [r for r in rows if r["status"] == "done"]
    other = sorted({r["model"] for r in done if r.get("model_sha256") != main_sha256})
    if other:
        raise DistillInputError(
            f"job dir {path} was made with another main model ({', '.join(other)}): a draft learns its own main "
            "model's tokens. Use --main with that model, or a job of this one."
        )
    if not done:
        raise DistillInputError(f"job dir {path} has no file transcribed (all failed)")
    pieces = ds.dataset(path / "pieces").to_table().to_pylist() if (path / "pieces").is_dir() else []
    by_file: dict[str, list[dict]] = {}
    for p in pieces:
        by_file.setdefault(p["file_id"], []).append(p)
    units = []
    for r in done:
        mine = sorted((p for p in by_file.get(r["file_id"], []) if not p["skipped"]), key=lambda p: p["piece"])
        if mine:
            units.append(Unit(r["file_id"], _job_pieces(Path(r["path"]), mine)))
    return units


def _job_pieces(path: Path, rows: list[dict]):
    def pieces():
        from ..audio import media

        samples = media.decode(path)
        for p in rows:
            yield p["piece"], samples[p["start_sample"] : p["end_sample"]], p["language"]

    return pieces


def _dataset_units(path: Path) -> list[Unit]:
    import datasets

    files = sorted(str(p) for p in [*path.glob("*.parquet"), *path.glob("data/*.parquet")])
    try:
        if not files:  # an audiofolder: its metadata through datasets' csv reader, the audio by ffmpeg (datasets'
            # own audiofolder builder encodes every file with torchcodec, which podscribe does not need)
            meta = datasets.load_dataset("csv", data_files=str(path / "metadata.csv"), split="train")
            return [Unit(str(path / name), _file_pieces(path / name)) for name in meta["file_name"]]
        data = datasets.load_dataset("parquet", data_files=files, split="train")
    except Exception as exc:  # datasets raises many kinds for a folder it cannot read
        raise DistillInputError(f"dataset {path} cannot be loaded with datasets: {exc}") from exc
    column = next((n for n, f in data.features.items() if isinstance(f, datasets.Audio)), None)
    if column is None:
        raise DistillInputError(f"dataset {path} has no audio column")
    data = data.cast_column(column, datasets.Audio(decode=False))  # decoded by ffmpeg, as every input is
    return [Unit(f"{path}#{i}", _dataset_pieces(data, column, i)) for i in range(len(data))]


def _file_pieces(path: Path):
    def pieces():
        from ..audio import media

        for p in media.pieces(path):
            yield p.index, p.samples, None

    return pieces


def _dataset_pieces(data, column: str, row: int):
    def pieces():
        from ..audio import media

        item = data[row][column]
        src = item.get("path")
        if item.get("bytes"):
            with tempfile.NamedTemporaryFile(suffix=Path(src or "x.wav").suffix or ".wav") as f:
                f.write(item["bytes"])
                f.flush()
                yield from ((p.index, p.samples, None) for p in media.pieces(Path(f.name)))
        else:
            yield from ((p.index, p.samples, None) for p in media.pieces(Path(src)))

    return pieces


# -- labelling -------------------------------------------------------------------------------------------------


def split_by_file(files: list[str], holdout: float, seed: int) -> set[str]:
    """The held-out files: a seeded share of them (at least one when there are two or more), never pieces."""
    if holdout <= 0 or len(files) < 2:
        return set()
    order = sorted(files, key=lambda f: hashlib.sha256(f"{seed}:{f}".encode()).hexdigest())
    return set(order[: max(1, round(holdout * len(files)))])


def sources_key(units: list[Unit], main_sha256: str, options) -> str:
    """What the labels depend on: the files, the main model, its compute type, the language and top-k."""
    what = [
        [u.key for u in units],
        main_sha256,
        options.compute_type,
        options.language,
        options.top_k,
        options.max_pieces,
    ]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:16]


def label(units: list[Unit], models, options, cache: Path, key: str, echo=print) -> list[Example]:
    """Every piece through the transcription gate and the main model: the examples, their encoder outputs and
        teacher targets written under ``cache``. Labelling is most of a short run's time, so it resumes too: each
        finished file's examples are appended to ``labels.jsonl`` (one line per file, after the ``key`` line; a torn
        last line is a file not finished), and a run with the same ``key`` labels only the files not in it. A file
    ffmpeg cannot decode is skipped with a line on ``echo`` (journalled with no examples: not tried again)."""
    journal = cache / "labels.jsonl"
    done: dict[str, list[Example]] = {}
    if journal.is_file():
        lines = journal.read_text().split("\n")
        if lines and lines[0] == json.dumps({"key": key}):
            for line in lines[1:]:
                try:
                    row = json.loads(line)
                except ValueError:
                    break  # a torn last line: that file is labelled again
                done[row["file"]] = [Example(**e) for e in row["examples"]]
        else:
            shutil.rmtree(cache)
    cache.mkdir(parents=True, exist_ok=True)
    if not journal.is_file() or not done:
        journal.write_text(json.dumps({"key": key}) + "\n")
    labeller = _Labeller(models, options, cache)
    examples: list[Example] = []
    for unit in units:
        if options.max_pieces and len(examples) >= options.max_pieces:
            break
        if unit.key in done:
            examples += done[unit.key]
            continue
        mine: list[Example] = []
        pending = []
        try:
            for piece in unit.pieces():
                pending.append(piece)
                if len(pending) == LABEL_BATCH:
                    mine += labeller.run(unit.key, pending)
                    pending = []
                if options.max_pieces and len(examples) + len(mine) + len(pending) >= options.max_pieces:
                    break
            mine += labeller.run(unit.key, pending)
        except AudioError as exc:  # one unreadable file costs its own examples, not the night's labelling
            echo(f"skipped {unit.key}: {exc}")
            mine = []
        with open(journal, "a") as f:
            f.write(json.dumps({"file": unit.key, "examples": [asdict(e) for e in mine]}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        examples += mine
    return examples


class _Labeller:
    def __init__(self, models, options, cache: Path):
        from ..decode.options import DecodeOptions
        from ..decode.transcriber import Transcriber

        self.models, self.options, self.cache = models, options, cache
        self.transcriber = Transcriber(models, DecodeOptions(language=options.language), use_assistant=False)
        self.count = max((int(p.stem) for p in cache.glob("*.pt")), default=-1) + 1

    @torch.inference_mode()
    def run(self, file_key: str, pieces: list) -> list[Example]:
        from ..decode.forced import forced_hidden, padded, row_logits
        from ..decode.kv_cache import KVCacheDecoder
        from ..decode.speculative import greedy

        if not pieces:
            return []
        t = self.transcriber
        samples = [np.asarray(s, dtype=np.float32) for _, s, _ in pieces]
        results, active = t.gate(samples)  # the transcription gate: energy, then the VAD's voice
        if not active:
            return []
        heard = t.first_pass([samples[i] for i in active], [pieces[i][2] for i in active], cross=False)
        encoded, languages = heard.encoded, heard.languages
        prompts = [t.prompt(lang) for lang in languages]
        # the first pass only, as the loop decodes it (what a draft drafts for most): its tokens, and end-of-text
        # when it ended on one; a later pass (the seek rule) would decode a shifted window of other features
        plain = t.plain
        limit = min(plain.max_length + len(prompts[0]), plain.max_positions)
        main = KVCacheDecoder(self.models.main)
        main.start(encoded, limit + 2)
        decoded = greedy(main, torch.tensor(prompts, device=encoded.device), plain.rules, limit)
        main.release()
        eot = self.models.tokens.eot
        rows = [r + ([eot] if f else []) for r, f in zip(decoded.tokens, decoded.finished)]
        examples = []
        ids = padded([p + r for p, r in zip(prompts, rows)], eot, encoded.device)
        hidden = forced_hidden(self.models.main, encoded, ids)
        for j, i in enumerate(active):
            p, n = len(prompts[j]), len(rows[j])
            if n == 0:
                continue
            logp = row_logits(self.models.main, hidden[j, p - 1 : p - 1 + n]).log_softmax(-1)
            top = logp.topk(self.options.top_k, -1)
            name = f"{self.count:06d}.pt"
            self.count += 1
            torch.save(
                {
                    "encoded": encoded[j].to(torch.float16).clone(),
                    "top_ids": top.indices.to(torch.int32),
                    "top_logp": top.values.to(torch.float16),
                },
                self.cache / name,
            )
            examples.append(Example(file_key, int(pieces[i][0]), prompts[j], rows[j], name))
        return examples


def token_counts(examples: list[Example], eot: int) -> dict[int, int]:
    counts: dict[int, int] = {}
    for e in examples:
        for t in e.tokens:
            if t < eot:
                counts[t] = counts.get(t, 0) + 1
    return counts


def load_cached(cache: Path, example: Example) -> dict:
    return torch.load(cache / example.cache, weights_only=True)


def batches(n: int, size: int, seed: int, epoch: int) -> Iterator[list[int]]:
    """The training order of one epoch: a permutation from (seed, epoch) alone, cut into batches, so a
    resumed run sees exactly the batches an uninterrupted one would."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(n, generator=g).tolist()
    for i in range(0, n - size + 1 if n >= size else 1, size):
        yield order[i : i + size]
