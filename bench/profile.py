"""Where a long-form run's time goes: a stage account of podscribe and faster-whisper, side by side (#47).

    .venv/bin/python -m bench.profile [--episodes dev01_garden] [--longform DIR] [--interval-ms 5] [--skip-fw]
                                      [--out account.json]

How: a thread samples every other thread's Python stack (``sys._current_frames``) every few milliseconds and
names what it was doing from the functions on it — no timer inside the product code, so what is measured is
exactly what a user runs (``job.run`` at the defaults, models loaded before the clock, as bench_longform). Each
interval's wall time goes to the stage the main thread was in, so the stages sum to the wall time by
construction; its CPU time (the process's CPU clock, which counts torch's OpenMP threads) goes to the same stage,
less what the process's other Python threads (the read-ahead: ffmpeg's pipe, cutting, VAD) and the sampler used
by their own clocks (the other threads' is accounted to their stages in a second table). ffmpeg runs in child processes: their CPU is one line.

Stages are found two ways. A *pass* (the encoder, the no-speech probe, the decoding loop, the scoring pass, second
chances, word timing) is the outermost match on the stack: a second chance's own decoding loop is a second
chance. A *leaf* (ffmpeg, cutting, VAD, Parquet) is the innermost match. Inside the decoding loop, the line of the
decoder's forward that was running splits the time into projections, attention, the output projection and the
rest (the loop's own Python and sampling). A stage with no match is "other" (glue, Python between stages).

Limits: a sample is attributed to a whole interval (5 ms by default: stages much shorter than that are counted
by frequency, not exactly); the read-ahead thread's own torch ops (VAD) use OpenMP threads whose CPU the process
clock cannot tell apart from the main thread's. Start-up (imports, model load) is measured before the clock and
reported apart; ``--cli-startup`` times a whole ``podscribe transcribe`` of a 1 s file in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import linecache
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import LONGFORM, discover_episodes, episode_files

# -- what a stack says ----------------------------------------------------------------------------------------

# (file name, qualified function names or None for any, stage). Passes: the outermost match wins.
PODSCRIBE_PASSES = [
    ("second_chances.py", {"fallback", "cover"}, "second chances"),
    ("transcriber.py", {"Transcriber._words"}, "word timing"),
    ("transcriber.py", {"Transcriber.features"}, "features (log-mel)"),
    ("generate.py", {"encode"}, "encoder"),
    ("kv_cache.py", {"CrossKV.project", "CrossKV.project_into"}, "cross-attention keys"),
    ("transcriber.py", {"Transcriber.probe"}, "no-speech probe + language"),
    ("transcriber.py", {"Transcriber.generate"}, "decoding loop"),
    ("transcriber.py", {"Transcriber.score"}, "scoring pass"),
    ("prefetch.py", {"Ahead.__next__"}, "waiting on the read-ahead"),
    ("transcriber.py", {"Transcriber.gate"}, "gate (energy; VAD not read ahead)"),
]
# Leaves: the innermost match wins.
PODSCRIBE_LEAVES = [
    ("media.py", {"probe"}, "ffprobe"),
    ("media.py", {"stream", "decode", "in_phase", "_wav_declared_s"}, "ffmpeg decode (pipe)"),
    ("media.py", {"cut", "choose_cut", "pause_cut", "frame_db", "rms_db"}, "cutting"),
    ("vad.py", None, "VAD"),
    ("segments.py", None, "segments, stitch"),
    ("stitch.py", None, "segments, stitch"),
    ("manifest.py", None, "Parquet, job files"),
    ("tables.py", None, "Parquet, job files"),
    ("workers.py", None, "Parquet, job files"),
    ("identity.py", None, "content ids (SHA-256)"),
    ("probes.py", None, "ffprobe"),
    ("finish.py", None, "outputs"),
    ("export.py", None, "outputs"),
    ("ownership.py", None, "outputs"),
    ("record.py", None, "outputs"),
    ("names.py", None, "outputs"),
    ("agreed.py", None, "outputs"),
]
FW_PASSES = [
    ("transcribe.py", {"WhisperModel.add_word_timestamps"}, "word timing"),
    ("transcribe.py", {"WhisperModel.detect_language"}, "language detection"),
    ("transcribe.py", {"WhisperModel.encode"}, "encoder"),
    ("transcribe.py", {"WhisperModel.generate_with_fallback"}, "decoding (CTranslate2 generate, fallback)"),
]
FW_LEAVES = [
    ("audio.py", {"decode_audio"}, "audio decode (PyAV)"),
    ("vad.py", None, "VAD"),
    ("feature_extractor.py", None, "features (log-mel)"),
]

# Inside the decoder's forward: what the running line does, by its text (first match).
DECODER_LINES = [  # a line holds several calls (op.fc2(op.act(op.fc1(op.norm3(x))))): the costly one first
    ("self.project", "output projection (vocabulary)"),
    ("fc1", "MLP"),
    ("_cross_attend", "cross-attention"),
    ("cross_q", "cross-attention projections"),
    ("cross_o", "cross-attention projections"),
    ("index_put_", "self-attention cache writes"),
    ("op.qkv(", "self-attention projections"),
    ("op.q(", "self-attention projections"),
    ("op.o(", "self-attention projections"),
    ("_attend", "self-attention"),
    ("scaled_dot_product_attention", "self-attention"),
    ("norm", "layer norms"),
    ("embed", "embeddings"),
]
DECODER_FORWARD = ("kv_cache.py", "KVCacheDecoder.forward")
INSIDE_THE_LOOP = {
    ("generate.py", "encode"): "encoder (a later window)",
    ("kv_cache.py", "CrossKV.project"): "cross-attention keys",
    ("kv_cache.py", "CrossKV.project_into"): "cross-attention keys",
}
LOOP = "decoding loop"


def _name(frame) -> tuple[str, str]:
    code = frame.f_code
    return os.path.basename(code.co_filename), code.co_qualname


def _matches(rule, base: str, qual: str) -> bool:
    file, names, _ = rule
    return base == file and (names is None or qual in names)


def classify(frame, passes, leaves) -> str:
    """The stage of one stack (innermost frame given)."""
    stack = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    names = [_name(f) for f in stack]  # innermost first
    for i in range(len(stack) - 1, -1, -1):  # outermost first
        base, qual = names[i]
        rule = next((r for r in passes if _matches(r, base, qual)), None)
        if rule is not None:
            if rule[2] == LOOP:
                return LOOP + ": " + _decoder_part(stack[:i], names[:i])
            return rule[2]
    for (base, qual), _ in zip(names, stack):  # innermost first
        rule = next((r for r in leaves if _matches(r, base, qual)), None)
        if rule is not None:
            return rule[2]
    return "other (glue)"


def _decoder_part(stack, names) -> str:
    for f, name in zip(stack, names):
        if name == DECODER_FORWARD:
            line = linecache.getline(f.f_code.co_filename, f.f_lineno)
            return next((part for key, part in DECODER_LINES if key in line), "decoder, other lines")
        if name in INSIDE_THE_LOOP:  # a later window's encoder, a draft's keys: the loop calls them, they are not it
            return INSIDE_THE_LOOP[name]
    return "sampling, rules, Python"


# -- the sampler ----------------------------------------------------------------------------------------------


def _thread_cpu_s(ident: int) -> float:
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, ProcessLookupError):
        return 0.0


@dataclass
class Account:
    wall_s: dict = field(default_factory=lambda: defaultdict(float))  # main thread's stage -> seconds
    cpu_s: dict = field(default_factory=lambda: defaultdict(float))
    beside_wall_s: dict = field(default_factory=lambda: defaultdict(float))  # other threads' stage -> seconds
    beside_cpu_s: dict = field(default_factory=lambda: defaultdict(float))
    samples: int = 0
    sampler_cpu_s: float = 0.0


class Sampler(threading.Thread):
    def __init__(self, passes, leaves, interval_s: float):
        super().__init__(name="bench-sampler", daemon=True)
        self.passes, self.leaves, self.interval_s = passes, leaves, interval_s
        self.account = Account()
        self.done = threading.Event()

    def run(self) -> None:
        main = threading.main_thread().ident
        me = threading.get_ident()
        a = self.account
        last_wall, last_cpu = time.perf_counter(), time.process_time()
        last_threads: dict[int, float] = {}
        own_start = _thread_cpu_s(me)
        last_own = own_start
        while not self.done.wait(self.interval_s):
            frames = sys._current_frames()  # noqa: SLF001  (the one way to read another thread's stack)
            now_wall, now_cpu, own = time.perf_counter(), time.process_time(), _thread_cpu_s(me)
            clocks = {ident: _thread_cpu_s(ident) for ident in frames if ident not in (main, me)}  # read together
            dt, dcpu = now_wall - last_wall, now_cpu - last_cpu - (own - last_own)  # the sampler's own CPU out
            last_wall, last_cpu, last_own = now_wall, now_cpu, own
            beside_cpu = 0.0
            for ident, cpu in clocks.items():
                thread = threading._active.get(ident)  # noqa: SLF001  (a thread's name, for the table)
                stage = f"{thread.name if thread else ident}: {classify(frames[ident], self.passes, self.leaves)}"
                last = last_threads.get(ident, cpu)  # a thread's CPU before its first sample: not counted
                used = cpu - last if cpu >= last else cpu  # below the last reading: a new thread under a reused id
                last_threads[ident] = cpu
                a.beside_wall_s[stage] += dt
                a.beside_cpu_s[stage] += used
                beside_cpu += used
            if main in frames:
                stage = classify(frames[main], self.passes, self.leaves)
                a.wall_s[stage] += dt
                a.cpu_s[stage] += dcpu - beside_cpu  # the process's CPU less the other threads' and the sampler's
            a.samples += 1
        a.sampler_cpu_s = _thread_cpu_s(me) - own_start

    def stop(self) -> Account:
        self.done.set()
        self.join()
        return self.account


def sampled(fn, passes, leaves, interval_s: float) -> tuple[object, Account, float, float]:
    """Run ``fn`` under the sampler: its result, the account, wall seconds, ffmpeg children's CPU seconds."""
    children_before = os.times()
    sampler = Sampler(passes, leaves, interval_s)
    start = time.perf_counter()
    sampler.start()
    try:
        result = fn()
    finally:
        account = sampler.stop()
    wall = time.perf_counter() - start
    children_after = os.times()
    children = (children_after.children_user + children_after.children_system) - (
        children_before.children_user + children_before.children_system
    )
    return result, account, wall, children


# -- the runs -------------------------------------------------------------------------------------------------


def podscribe_run(files: list[Path], job_dir: Path, batch_size: int | None = None):
    from pipeline.decode import DecodeOptions
    from pipeline.facts.runtime import pick_runtime
    from pipeline.job.config import JobOptions
    from pipeline.job.run import run
    from pipeline.models.load import load_models

    decode = DecodeOptions() if batch_size is None else DecodeOptions(batch_size=batch_size)
    options = JobOptions(out_dir=job_dir, model="base", decode=decode, progress=False)
    start = time.perf_counter()
    models = load_models(
        options.model, options.assistant, pick_runtime(options.device, options.compute_type), options.cache_dir
    )
    load_s = time.perf_counter() - start

    def go():
        summary = run([str(p) for p in files], options, models=models)
        if summary.failed:
            raise RuntimeError(f"podscribe failed on {summary.failures}")

    return go, load_s


def faster_whisper_run(files: list[Path], model_dir: Path):
    from faster_whisper import WhisperModel

    start = time.perf_counter()
    model = WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=os.cpu_count() or 2)
    load_s = time.perf_counter() - start

    def go():
        for path in files:
            segments, _ = model.transcribe(str(path), beam_size=1, vad_filter=True)  # its default fallback
            for _ in segments:
                pass

    return go, load_s


def cli_startup_s(tmp: Path, repeats: int = 3) -> list[float]:
    """Wall seconds of ``podscribe transcribe`` on a 1 s file in a fresh process (model cached, job new)."""
    wav = tmp / "one_second.wav"
    cmd = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-ar", "16000"]
    subprocess.run([*cmd, str(wav)], check=True)
    out = []
    for i in range(repeats):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "podscribe", "transcribe", str(wav), "--model", "base", "--out", str(tmp / f"j{i}")],
            check=True,
            capture_output=True,
        )
        out.append(time.perf_counter() - start)
    return out


# -- the report -----------------------------------------------------------------------------------------------


def table(title: str, account: Account, wall: float, audio_s: float) -> list[str]:
    lines = [f"{title}: {wall:.1f} s wall for {audio_s / 60:.1f} min of audio ({audio_s / wall:.1f}x real time)"]
    lines.append(f"  {'stage (main thread)':<52} {'wall s':>8} {'%':>6} {'CPU s':>8}")
    for stage, s in sorted(account.wall_s.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {stage:<52} {s:8.2f} {100 * s / wall:6.1f} {account.cpu_s[stage]:8.2f}")
    sampled_wall = sum(account.wall_s.values())
    lines.append(f"  {'(sampled total)':<52} {sampled_wall:8.2f} {100 * sampled_wall / wall:6.1f}")
    if account.beside_wall_s:
        lines.append(f"  {'beside it (other threads, overlapping)':<52} {'wall s':>8} {'':>6} {'CPU s':>8}")
        for stage, s in sorted(account.beside_wall_s.items(), key=lambda kv: -kv[1]):
            if stage.endswith("other (glue)") and account.beside_cpu_s[stage] < 0.05:
                continue  # a thread waiting (tqdm's monitor, a queue): no work
            lines.append(f"  {stage:<52} {s:8.2f} {'':>6} {account.beside_cpu_s[stage]:8.2f}")
    lines.append(f"  sampler: {account.samples} samples, {account.sampler_cpu_s:.2f} CPU s of its own")
    return lines


def as_json(account: Account, wall: float, children: float, load_s: float) -> dict:
    return {
        "wall_s": wall,
        "load_s": load_s,
        "ffmpeg_children_cpu_s": children,
        "stages_wall_s": dict(account.wall_s),
        "stages_cpu_s": dict(account.cpu_s),
        "beside_wall_s": dict(account.beside_wall_s),
        "beside_cpu_s": dict(account.beside_cpu_s),
        "samples": account.samples,
        "sampler_cpu_s": account.sampler_cpu_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--longform", type=Path, default=LONGFORM)
    parser.add_argument("--episodes", help="comma-separated episode names (default: all in the folder)")
    parser.add_argument("--interval-ms", type=float, default=5.0)
    parser.add_argument("--skip-fw", action="store_true")
    parser.add_argument("--cli-startup", action="store_true", help="also time podscribe on a 1 s file, 3 times")
    parser.add_argument("--batch-size", type=int, help="podscribe's --batch-size (default: its default)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    started = time.perf_counter()
    import pipeline.job.run  # noqa: F401  (the imports a run needs, timed)

    import_s = time.perf_counter() - started
    names = args.episodes.split(",") if args.episodes else discover_episodes(args.longform)
    files = list(episode_files(args.longform, names).values())
    audio_s = sum(json.loads(p.read_text())["duration"] for p in _refs(args.longform, files))
    interval = args.interval_ms / 1000
    report: dict = {"episodes": names, "audio_s": audio_s, "interval_ms": args.interval_ms, "import_s": import_s}
    lines = [f"imports (pipeline.job.run, torch, transformers): {import_s:.2f} s"]
    with tempfile.TemporaryDirectory(prefix="podscribe-profile-") as tmp_name:
        tmp = Path(tmp_name)
        go, load_s = podscribe_run(files, tmp / "job", args.batch_size)
        _, account, wall, children = sampled(go, PODSCRIBE_PASSES, PODSCRIBE_LEAVES, interval)
        report["podscribe"] = as_json(account, wall, children, load_s)
        lines += [f"podscribe base (defaults): model load {load_s:.2f} s (before the clock)"]
        lines += table("podscribe base", account, wall, audio_s)
        lines.append(f"  ffmpeg child processes: {children:.2f} CPU s")
        if not args.skip_fw:
            from pipeline.models import registry

            go, load_s = faster_whisper_run(files, registry.ct2_directory("base", tmp))
            _, account, wall, children = sampled(go, FW_PASSES, FW_LEAVES, interval)
            report["faster-whisper"] = as_json(account, wall, children, load_s)
            lines += [f"faster-whisper int8 (beam 1, VAD, its temperature fallback): model load {load_s:.2f} s"]
            lines += table("faster-whisper", account, wall, audio_s)
        if args.cli_startup:
            report["cli_startup_s"] = cli_startup_s(tmp)
            lines.append(
                "podscribe transcribe of a 1 s file, fresh process: "
                + ", ".join(f"{s:.2f} s" for s in report["cli_startup_s"])
            )
    print("\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    shutil.rmtree(tmp_name, ignore_errors=True)


def _refs(longform: Path, files: list[Path]) -> list[Path]:
    wanted = {p.name for p in files}
    return [p for p in sorted(longform.glob("*.ref.json")) if json.loads(p.read_text())["audio"] in wanted]


if __name__ == "__main__":
    main()
