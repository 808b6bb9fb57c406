"""Real weights on the GPU: token identity of speculative decoding, and the whole pipeline end to end.

    python3 -m bench.gpu_real identity --model DIR --clips DIR [--device cuda] [--out FILE]
    python3 -m bench.gpu_real pipeline --model DIR --clips DIR --work DIR [--out FILE]
    python3 -m bench.gpu_real large-v3-shaped --model DIR --clips DIR --work DIR [--out FILE]

``bench.gpu`` measures large-v3's shapes with random weights; this runs a trained model (tiny.en, carried as
``bench.gpu_pack`` makes it) on real speech, so agreement and WER mean something:

- ``identity``: per compute type (float16, the CUDA default; bfloat16; float32) the clips' token ids from
  transformers' own greedy ``generate`` (main model alone, batch 1), podscribe's loop alone at batch 1/4/8, and
  podscribe's loop with a draft at batch 1/4/8. The draft is distil-shaped: a decoder-only model holding two of
  the main decoder's layers (the first and the last, as distil-large-v3 was initialised), reading the main
  encoder's output. Rows that differ from the loop alone at batch 1, WER against the human references,
  acceptance, decoder seconds.
- ``large-v3-shaped``: the same at large-v3's size (random weights; the default model's shape and 128 mel bins).
- ``pipeline``: ``podscribe transcribe`` in real processes at the device's defaults (auto device and compute
  type, default assistant, subtitles): the clips and an 8-minute long-form episode, then the same inputs with
  the distil-shaped draft as ``--assistant``. Both jobs' tables are read back (Parquet), their segments
  compared, the episode scored with the long-form set's scorer, and the subtitles parsed.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
SIZES = (1, 4, 8)


def distil_shaped(main, keep: tuple[int, ...] = (0, -1)):
    """A decoder-only draft: ``keep`` layers of the main decoder, its embeddings, norm and projection."""
    from transformers import WhisperForCausalLM

    config = copy.deepcopy(main.config)
    config.is_encoder_decoder = False
    config.decoder_layers = len(keep)
    config.architectures = ["WhisperForCausalLM"]
    draft = WhisperForCausalLM(config).to(device=main.device, dtype=main.dtype).eval()
    layers = main.model.decoder.layers
    with torch.no_grad():
        for mine, theirs in zip(draft.model.decoder.layers, keep):
            mine.load_state_dict(layers[theirs].state_dict())
        draft.model.decoder.embed_tokens.load_state_dict(main.model.decoder.embed_tokens.state_dict())
        draft.model.decoder.embed_positions.load_state_dict(main.model.decoder.embed_positions.state_dict())
        draft.model.decoder.layer_norm.load_state_dict(main.model.decoder.layer_norm.state_dict())
        draft.proj_out.weight.copy_(main.proj_out.weight)
    draft.generation_config = copy.deepcopy(main.generation_config)
    return draft


MAX_CLIPS = {"n": 0}  # --max-clips (a smoke run on a CPU): 0 for all


def read_clips(folder: Path) -> tuple[list[Path], list[str]]:
    refs = [json.loads(line) for line in (folder / "references.jsonl").read_text().splitlines() if line.strip()]
    refs = refs[: MAX_CLIPS["n"]] if MAX_CLIPS["n"] else refs
    return [folder / r["audio"] for r in refs], [r["text"] for r in refs]


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _record(rows: dict, tok, refs: list[str], label: str, tokens: list, wall: float, stats=None) -> None:
    from pipeline.facts.metrics import wer

    texts = [tok.decode(t, skip_special_tokens=True).strip() for t in tokens]
    rows[label] = {"tokens": tokens, "wall_s": round(wall, 3), "wer": round(wer(refs, texts), 4)}
    if stats is not None:
        drafted, accepted = sum(s.drafted for s in stats), sum(s.accepted for s in stats)
        rows[label]["acceptance"] = round(accepted / max(1, drafted), 3)
        rows[label]["main_calls"] = sum(s.main_calls for s in stats)


@torch.inference_mode()
def identity(model_dir: str, clips: Path, device: str, dtypes: list[str]) -> dict:
    from pipeline.audio import media
    from pipeline.decode.generate import Generator, encode, log_mel
    from pipeline.decode.hf_generate import hf_generate
    from pipeline.facts.runtime import pick_runtime
    from pipeline.models.load import load_models

    paths, refs = read_clips(clips)
    pieces = [media.decode(p) for p in paths]
    report: dict = {"clips": len(pieces), "audio_s": round(sum(len(p) for p in pieces) / media.SAMPLE_RATE, 1)}
    for name in dtypes:
        runtime = pick_runtime(device, name)
        plain = load_models(model_dir, "none", runtime)
        draft = distil_shaped(plain.main)
        models = dataclasses.replace(plain, runtime=runtime).with_assistant(draft, "distil-shaped(0,-1)")
        tok = plain.processor.tokenizer
        features = log_mel(plain.processor.feature_extractor, pieces, runtime.device, runtime.dtype)
        encoded = encode(plain.main, features)
        rows: dict[str, dict] = {}
        record = functools.partial(_record, rows, tok, refs)
        start = time.perf_counter()
        hf = [
            hf_generate(plain.main, features[i : i + 1], ["en"], True, None, encoded[i : i + 1])[0][0]
            for i in range(len(pieces))
        ]
        sync(device)
        record("transformers generate, alone, 1", hf, time.perf_counter() - start)
        for speculative in (False, True):
            generator = Generator(models, use_assistant=speculative)
            prompt = generator.prompt("en")
            for size in SIZES:
                generator.generate(features[:size], [prompt] * min(size, len(pieces)), encoded[:size])  # warm-up
                sync(device)
                start, out = time.perf_counter(), []
                for i in range(0, len(pieces), size):
                    part = slice(i, i + size)
                    out += generator.generate(features[part], [prompt] * features[part].shape[0], encoded[part])
                sync(device)
                label = f"podscribe {'with draft' if speculative else 'alone'}, {size}"
                record(label, [g.tokens for g in out], time.perf_counter() - start, [g.stats for g in out])
        reference = rows["podscribe alone, 1"]["tokens"]
        for row in rows.values():
            row["rows_differing"] = sum(a != b for a, b in zip(row["tokens"], reference))
            row["n_tokens"] = sum(len(t) for t in row["tokens"])
            del row["tokens"]
        report[name] = {"runtime": runtime.describe(), "rows": rows}
        print(json.dumps({name: report[name]}, indent=1), flush=True)
        del plain, models, draft, encoded, features
        if torch.device(device).type == "cuda":
            torch.cuda.empty_cache()
    return report


def save_draft(model_dir: str, out: Path, device: str) -> Path:
    """The distil-shaped draft as a model dir ``--assistant`` takes (float32 weights, the main's tokenizer)."""
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    main = WhisperForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32, use_kernels=False)
    distil_shaped(main).save_pretrained(out)
    WhisperProcessor.from_pretrained(model_dir).save_pretrained(out)
    return out


def podscribe(args: list[str], env: dict) -> tuple[int, float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True, env=env)
    return done.returncode, round(time.perf_counter() - start, 1), (done.stdout + done.stderr)[-3000:]


def read_job(job: Path) -> dict:
    import pyarrow.dataset as ds

    files = ds.dataset(job / "files").to_table().to_pylist()
    segments = ds.dataset(job / "segments").to_table().to_pylist()
    pieces = ds.dataset(job / "pieces").to_table().to_pylist()
    return {"files": files, "segments": segments, "pieces": pieces, "job": json.loads((job / "job.json").read_text())}


def pipeline_run(model_dir: str, clips: Path, work: Path) -> dict:
    import srt
    import webvtt

    from bench.common import load_scorer, score

    work.mkdir(parents=True, exist_ok=True)
    draft = save_draft(model_dir, work / "draft", "cpu")
    paths, _ = read_clips(clips)
    episode = next((p for p in clips.iterdir() if p.stem == "dev03_jazz" and p.suffix != ".json"), None)
    episode = None if MAX_CLIPS["n"] else episode
    inputs = [str(p) for p in paths] + ([str(episode)] if episode else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])))
    report: dict = {"inputs": len(inputs)}
    jobs = {"defaults": [], "with draft": ["--assistant", str(draft)]}
    for label, extra in jobs.items():
        job = work / label.replace(" ", "-")
        code, wall, log = podscribe(
            ["transcribe", *inputs, "--model", model_dir, "--subtitles", "srt,vtt", "--out", str(job), *extra], env
        )
        entry: dict = {"exit": code, "wall_s": wall}
        report[label] = entry
        if code != 0:
            entry["log"] = log
            print(json.dumps({label: entry}, indent=1), flush=True)
            continue
        tables = read_job(job)
        models = tables["job"]["config"]["models"]
        entry["runtime"], entry["assistant"] = models["runtime"], models["assistant"]
        entry["files"] = dict(Counter(f["status"] for f in tables["files"]))
        entry["segments"] = len(tables["segments"])
        entry["drafted"] = sum(p["drafted"] or 0 for p in tables["pieces"])
        entry["accepted"] = sum(p["accepted"] or 0 for p in tables["pieces"])
        subs = sorted(p for p in (job / "subtitles").glob("*") if p.suffix in (".srt", ".vtt"))
        entry["subtitles"] = {
            "srt": sum(len(list(srt.parse(p.read_text()))) for p in subs if p.suffix == ".srt"),
            "vtt": sum(len(webvtt.read(str(p)).captions) for p in subs if p.suffix == ".vtt"),
            "files": len(subs),
        }
        if episode:
            frow = next(f for f in tables["files"] if Path(f["path"]).name == episode.name)
            segs = sorted(
                (s for s in tables["segments"] if s["file_id"] == frow["file_id"]), key=lambda s: s["segment"]
            )
            rows = [{"audio": episode.name, "start": s["start_s"], "end": s["end_s"], "text": s["text"]} for s in segs]
            scored = score(load_scorer(clips), clips, {"episodes": {"dev03_jazz": {"rows": rows}}})
            entry["episode"] = {"wall_s": frow["wall_s"], "duration_s": frow["duration_s"], "score": scored["overall"]}
        entry["_segments"] = [
            (s["path"], s["segment"], s["start_s"], s["end_s"], s["text"]) for s in tables["segments"]
        ]
        print(json.dumps({label: {k: v for k, v in entry.items() if not k.startswith("_")}}, indent=1, default=str))
    a, b = report["defaults"].pop("_segments", None), report["with draft"].pop("_segments", None)
    if a is not None and b is not None:
        a, b = sorted(map(tuple, a)), sorted(map(tuple, b))
        report["segments_identical"] = a == b
        report["segments_differing"] = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
    print(json.dumps({k: report.get(k) for k in ("segments_identical", "segments_differing")}), flush=True)
    return report


LARGE_V3 = {
    "d_model": 1280,
    "encoder_layers": 32,
    "decoder_layers": 32,
    "encoder_attention_heads": 20,
    "decoder_attention_heads": 20,
    "encoder_ffn_dim": 5120,
    "decoder_ffn_dim": 5120,
    "num_mel_bins": 128,
}


def large_v3_shaped(model_dir: str, clips: Path, work: Path) -> dict:
    """``podscribe transcribe`` at the CUDA defaults with a model of large-v3's shape (random weights, the given
    model's vocabulary): the default model's size and 128 mel bins through the whole pipeline. Its text is noise."""
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration, WhisperTokenizer

    folder = work / "large-v3-shaped"
    start = time.perf_counter()
    config = WhisperConfig.from_pretrained(model_dir)
    for key, value in LARGE_V3.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = WhisperForConditionalGeneration(config).half()
    model.generation_config = WhisperForConditionalGeneration.from_pretrained(
        model_dir, use_kernels=False
    ).generation_config
    model.save_pretrained(folder)
    WhisperTokenizer.from_pretrained(model_dir).save_pretrained(folder)
    WhisperFeatureExtractor(feature_size=128).save_pretrained(folder)
    del model
    made_s = round(time.perf_counter() - start, 1)
    clip = read_clips(clips)[0][0]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])))
    job = work / "large-v3-job"
    # no second chances: on random weights every piece would fail Whisper's checks and climb the whole ladder
    args = ["transcribe", str(clip), "--model", str(folder), "--subtitles", "srt", "--out", str(job)]
    code, wall, log = podscribe([*args, "--fallback-beams", "0", "--no-coverage"], env)
    out = {"made_s": made_s, "exit": code, "wall_s": wall, "log": log[-1500:]}
    if code == 0:
        tables = read_job(job)
        out["runtime"] = tables["job"]["config"]["models"]["runtime"]
        out["files"] = [(f["status"], f.get("error")) for f in tables["files"]]
        out["pieces"] = [(p["n_tokens"], p["main_calls"], p["skipped"]) for p in tables["pieces"]]
    print(json.dumps(out, indent=1, default=str), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("identity", "pipeline", "large-v3-shaped"))
    parser.add_argument("--model", required=True, help="a Transformers Whisper dir (bench.gpu_pack --unpack)")
    parser.add_argument("--clips", type=Path, required=True, help="bench.gpu_pack's clips folder")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--dtypes", default=None, help="compute types for identity (default: float16,bfloat16,float32 on CUDA)"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/podscribe-gpu-real"))
    parser.add_argument("--max-clips", type=int, default=0, help="the first N clips, no episode (a smoke run)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    MAX_CLIPS["n"] = args.max_clips
    import transformers

    transformers.logging.set_verbosity_error()
    if args.what == "identity":
        default = "float16,bfloat16,float32" if torch.device(args.device).type == "cuda" else "float32"
        report = identity(args.model, args.clips, args.device, (args.dtypes or default).split(","))
    elif args.what == "pipeline":
        report = pipeline_run(args.model, args.clips, args.work)
    else:
        report = large_v3_shaped(args.model, args.clips, args.work)
    if torch.device(args.device).type == "cuda":
        report["gpu"] = torch.cuda.get_device_name()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
