"""`--dry-run`: the plan before the night — which inputs, how many hours of audio, and how long this machine
should take, from the rate it recorded on earlier runs with the same model, compute type and device.

Each run that decodes something records its rate (audio seconds per wall second, model load included) in
``<cache dir>/rates.json`` under that key; the estimate is the latest recorded one. Nothing is written into a
job dir and no model is loaded.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import audio
from .atomic import atomic_write_bytes, read_json_dict
from .audio import AudioError
from .models.registry import default_cache_dir
from .progress import clock

RATES = "rates.json"


def rate_key(model: str | None, compute_type: str, device: str) -> str:
    return f"{model or 'default'}|{compute_type}|{device}"


def _rates_path(cache_dir: Path | None) -> Path:
    return Path(cache_dir or default_cache_dir()) / RATES


def recorded_rate(key: str, cache_dir: Path | None = None) -> float | None:
    try:
        rates = json.loads(_rates_path(cache_dir).read_text())
        return float(rates[key]["rate"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record_rate(key: str, audio_s: float, wall_s: float, cache_dir: Path | None = None) -> None:
    """Remember this machine's rate for ``key`` (best effort: a cache that cannot be written is no error)."""
    if audio_s <= 0 or wall_s <= 0:
        return
    path = _rates_path(cache_dir)
    rates = read_json_dict(path)
    rates[key] = {"rate": audio_s / wall_s, "audio_s": audio_s, "wall_s": wall_s}
    try:
        atomic_write_bytes(path, json.dumps(rates, indent=1, sort_keys=True).encode())
    except Exception:  # a read-only cache: the estimate is only a convenience
        pass


def plan(inputs: list[str], key: str, cache_dir: Path | None = None) -> str:
    """What a run of ``inputs`` would decode, and the estimate; a text for the terminal."""
    from .job.inputs import expand_inputs

    refs = expand_inputs(inputs)

    def probed(ref):
        if ref.error:
            return AudioError(ref.error)
        try:
            return audio.probe(ref.path)
        except AudioError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=4) as pool:
        infos = list(pool.map(probed, refs))
    good = [(ref, info) for ref, info in zip(refs, infos) if isinstance(info, audio.AudioInfo)]
    bad = [(ref, info) for ref, info in zip(refs, infos) if isinstance(info, AudioError)]
    total_s = sum(info.duration_s or 0.0 for _, info in good)
    lines = [f"{len(good)} inputs, {clock(total_s)} of audio" + (f"; {len(bad)} cannot be read" if bad else "")]
    lines += [f"  {clock(info.duration_s or 0.0)}  {ref.path}" for ref, info in good]
    lines += [f"  cannot be read: {ref.path}: {info}" for ref, info in bad]
    rate = recorded_rate(key, cache_dir)
    model = key.split("|", 1)[0]
    if rate:
        lines.append(f"estimate: {clock(total_s / rate)} at {rate:.1f}x real time (recorded on this machine, {model})")
    else:
        lines.append(f"estimate: none yet (no rate recorded on this machine for {key}; a first run records one)")
    lines.append("dry run: nothing was decoded or written")
    return "\n".join(lines)
