"""Real Whisper weights small enough to carry to a GPU machine, and the clips to run them on.

    .venv/bin/python -m bench.gpu_pack --out .device            # here: tiny.en in int8, clips (bench/gpu_prepare.sh)
    python3 -m bench.gpu_pack --unpack .device/tiny.en-int8 DIR  # there: a Transformers dir in float16

tiny.en's weights are 75 MB in float16, more than a device call may carry beside the code. Rounded to int8 per
output channel (each row's largest magnitude maps to 127), every matrix of 2+ dimensions above 64k values
(the token embedding, which is also the output projection, and the linear layers) takes a byte a value:
38 MB. Dequantized to float16 on the GPU machine it is a real trained Whisper whose weights differ from
tiny.en's by at most half a step of its row's scale: it transcribes speech as tiny.en does (the CPU reference
run here, on the same dequantized weights, says how closely), so the end-to-end run there decodes speech, not
noise. Biases, norms, convolutions and position tables stay float16.

The clips: the first ``--clips`` English human-referenced clips of ../shared/speech and one long-form episode
(dev03_jazz, Opus, 8 minutes) with its reference and the long-form scorer, each re-encoded to 16 kHz mono
FLAC (lossless 16-bit, so any ffmpeg decodes the same samples) except the episode, which stays as made.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

from bench.common import LONGFORM, SPEECH, english_clips, ffmpeg

QUANTIZE_MIN_VALUES = 65536  # smaller tensors (biases, norms) stay float16: a few hundred kB in all
EPISODE = "dev03_jazz"


def pack_weights(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """int8 rows with a float16 scale each (``NAME.int8``, ``NAME.scale``) for the large matrices; the rest float16."""
    out = {}
    for name, value in state.items():
        value = np.asarray(value, dtype=np.float32)
        if value.ndim == 2 and value.size >= QUANTIZE_MIN_VALUES:
            scale = np.abs(value).max(axis=1, keepdims=True) / 127.0
            scale[scale == 0] = 1.0
            out[f"{name}.int8"] = np.clip(np.rint(value / scale), -127, 127).astype(np.int8)
            out[f"{name}.scale"] = scale.astype(np.float16)
        else:
            out[name] = value.astype(np.float16)
    return out


def unpack_weights(packed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for name, value in packed.items():
        if name.endswith(".scale"):
            continue
        if name.endswith(".int8"):
            base = name.removesuffix(".int8")
            out[base] = (value.astype(np.float32) * packed[f"{base}.scale"].astype(np.float32)).astype(np.float16)
        else:
            out[name] = value
    return out


def pack_model(alias: str, out: Path) -> None:
    from safetensors.numpy import load_file, save_file

    from pipeline.models.registry import resolve

    source = Path(resolve(alias).location)
    out.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.is_file() and not f.name.endswith((".safetensors", ".bin")) and f.name != "podscribe_source.json":
            shutil.copy2(f, out / f.name)
    save_file(pack_weights(load_file(str(source / "model.safetensors"))), str(out / "weights-int8.safetensors"))
    (out / "PACKED.json").write_text(json.dumps({"from": alias, "rule": __doc__.split("\n\n")[1]}, indent=1))


def unpack_model(packed_dir: Path, out: Path) -> Path:
    """A Transformers dir from a pack (its files as they are, or ``.xz``-compressed as bench/gpu_prepare.sh leaves them)."""
    import lzma

    from safetensors.numpy import load, save_file

    out.mkdir(parents=True, exist_ok=True)
    packed = None
    for f in packed_dir.iterdir():
        data = lzma.decompress(f.read_bytes()) if f.suffix == ".xz" else None
        name = f.name.removesuffix(".xz")
        if name == "weights-int8.safetensors":
            packed = load(data if data is not None else f.read_bytes())
        elif f.is_file():
            (out / name).write_bytes(data if data is not None else f.read_bytes())
    state = unpack_weights(packed)
    save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(out / "model.safetensors"), {"format": "pt"})
    return out


def pack_clips(out: Path, count: int, speech: Path = SPEECH, longform: Path = LONGFORM) -> None:
    out.mkdir(parents=True, exist_ok=True)
    refs = []
    for i, clip in enumerate(english_clips(speech, count)):
        name = f"{i:02d}_{clip.path.stem}.flac"
        ffmpeg("-i", f"file:{clip.path}", "-ac", "1", "-ar", "16000", "-sample_fmt", "s16", str(out / name))
        refs.append({"audio": name, "text": clip.text})
    (out / "references.jsonl").write_text("".join(json.dumps(r) + "\n" for r in refs))
    episode = next((p for p in longform.glob(f"{EPISODE}.*") if p.suffix != ".json"), None)
    if episode is not None:
        for f in (episode, longform / f"{EPISODE}.ref.json", longform / "score.py"):
            shutil.copy2(f, out / f.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="pack tiny.en and the clips into this folder")
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument(
        "--unpack", nargs=2, type=Path, metavar=("PACKED", "DIR"), help="a Transformers dir from a pack"
    )
    args = parser.parse_args()
    if args.unpack:
        print(unpack_model(*args.unpack))
        return
    if not args.out:
        parser.error("--out or --unpack")
    pack_model("tiny.en", args.out / "tiny.en-int8")
    pack_clips(args.out / "clips", args.clips)


if __name__ == "__main__":
    main()
