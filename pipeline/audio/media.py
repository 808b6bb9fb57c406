"""Audio stage: probe, stream-decode to 16 kHz mono float32 with ffmpeg, cut into pieces at silences.

Memory stays bounded: the decoder reads ffmpeg's output in blocks and holds at
most one maximum-length piece plus one block, however long the file is.

The mono mix is ffmpeg's own (``-ac 1``, bit for bit), but ffmpeg also hands over the two stereo channels:
a file wired out of phase (one channel's polarity inverted) cancels in that mix and would decode to near
silence, a transcript of nothing and no word why. Where the mix is far quieter than the channels' difference,
that difference is the audio, and the file's row says so.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import ffmpeg
import numpy as np

from ..facts.whisper import SAMPLE_RATE

# What a folder given as input is searched for (and what `podscribe site` calls audio when a folder is no job).
AUDIO_EXTENSIONS = {
    ".mp3",
    ".m4a",
    ".m4b",
    ".aac",
    ".opus",
    ".ogg",
    ".oga",
    ".flac",
    ".wav",
    ".mp4",
    ".m4v",
    ".mkv",
    ".mka",
    ".webm",
    ".mov",
    ".wma",
    ".aif",
    ".aiff",
}

ENERGY_FRAME = SAMPLE_RATE // 50  # samples per 20 ms energy frame (silence search)


class AudioError(RuntimeError):
    """A file that cannot be turned into audio; the message is meant for the manifest."""


@dataclass(frozen=True)
class CutOptions:
    min_s: float = 15.0
    max_s: float = 30.0
    silence_db: float = -40.0  # frames this far below the piece's loudest are silence
    min_silence_s: float = 0.3
    prefer_s: float = 20.0  # cut at the longest silence after this many seconds where there is one (decision 0045)
    at_pauses: bool = False  # cut in the latest pause the VAD hears in [min_s, max_s] (energy only as a fallback)

    def __post_init__(self):
        if not 0 < self.min_s <= self.max_s <= 30.0:
            raise ValueError(f"piece limits must satisfy 0 < min <= max <= 30 s, got {self.min_s}..{self.max_s}")


@dataclass
class Piece:
    index: int
    start_sample: int  # in the decoded 16 kHz stream, sample-exact
    samples: np.ndarray | None  # released (None) once decoded
    n_samples: int = -1

    def __post_init__(self):
        if self.n_samples < 0:
            self.n_samples = len(self.samples)

    @property
    def end_sample(self) -> int:
        return self.start_sample + self.n_samples

    @property
    def start_s(self) -> float:
        return self.start_sample / SAMPLE_RATE

    @property
    def duration_s(self) -> float:
        return self.n_samples / SAMPLE_RATE


@dataclass(frozen=True)
class AudioInfo:
    duration_s: float | None  # what the container announces (a truncated file decodes to less)
    format_name: str
    codec: str
    notes: tuple[str, ...] = ()  # warnings known before decoding (several audio streams, a cut last frame)
    tags: tuple[tuple[str, str], ...] = ()  # the container's title / artist / date, where it has them


def ffmpeg_name(path: Path) -> str:
    """The path as ffmpeg/ffprobe must see it: ``file:`` so that no name is read as a protocol
    (``S01E01:Pilot.wav``) or an option (``-intro.mp3``)."""
    return "file:" + str(Path(path).absolute())


def probe(path: Path) -> AudioInfo:
    path = Path(path)
    if not path.exists():
        raise AudioError(f"file not found: {path}")
    if not path.is_file():
        raise AudioError(f"not a regular file: {path}")
    if path.stat().st_size == 0:
        raise AudioError("file is empty (0 bytes)")
    try:
        info = ffmpeg.probe(ffmpeg_name(path))
    except ffmpeg.Error as exc:
        raise AudioError(_not_audio(path, exc.stderr)) from exc
    audio = [s for s in info.get("streams", []) if s.get("codec_type") == "audio"]
    if not audio:
        raise AudioError("file has no audio stream")
    fmt = info.get("format", {})
    duration = audio[0].get("duration") or fmt.get("duration")  # a video track may outlast the audio
    duration_s = float(duration) if duration else None
    notes = []
    if len(audio) > 1:
        notes.append(
            f"{len(audio)} audio streams: transcribed the first ({_describe_stream(audio[0])}); "
            f"not transcribed: {', '.join(_describe_stream(s) for s in audio[1:])}"
        )
    codec = audio[0].get("codec_name", "?")
    if "wav" in fmt.get("format_name", ""):
        duration_s = max(duration_s or 0.0, _wav_declared_s(path) or 0.0) or None
    if codec in ("mp3", "mp2") and duration_s and _mpeg_last_frame_cut(path, duration_s):
        notes.append("truncated: the file ends inside an MPEG audio frame (cut short); its end is missing")
    return AudioInfo(duration_s, fmt.get("format_name", "?"), codec, tuple(notes), container_tags(fmt.get("tags")))


# A files row keeps these container tags (an archive's episode title and date, without a second tool); the
# first of each list the container has.
TAGS = {
    "title": ("title",),
    "artist": ("artist", "album_artist", "author", "composer"),
    "date": ("date", "year", "creation_time"),
}


def container_tags(raw: dict | None) -> tuple[tuple[str, str], ...]:
    found = {str(k).lower(): str(v).strip() for k, v in (raw or {}).items() if str(v).strip()}
    out = []
    for name, keys in TAGS.items():
        value = next((found[k] for k in keys if k in found), None)
        if value:
            out.append((name, value))
    return tuple(out)


def _describe_stream(s: dict) -> str:
    tags = s.get("tags") or {}
    extra = ", ".join(f"{k} {tags[k]}" for k in ("language", "title") if tags.get(k))
    return f"stream #{s.get('index', '?')} {s.get('codec_name', '?')}" + (f", {extra}" if extra else "")


def _wav_declared_s(path: Path) -> float | None:
    """Seconds of audio a WAV header announces when the file holds less than that (a cut copy);
    None when the header is whole or says nothing (streamed WAVs announce 0 or 0xFFFFFFFF)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return None
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos, byte_rate = 12, None
    while pos + 8 <= len(head):
        chunk, length = head[pos : pos + 4], int.from_bytes(head[pos + 4 : pos + 8], "little")
        if chunk == b"fmt " and pos + 20 <= len(head):
            byte_rate = int.from_bytes(head[pos + 16 : pos + 20], "little")
        if chunk == b"data":
            if byte_rate and 0 < length < 0xFFFFFFFF and pos + 8 + length > size:
                return length / byte_rate
            return None
        pos += 8 + length + (length & 1)
    return None


def _mpeg_last_frame_cut(path: Path, duration_s: float) -> bool:
    """A constant-bitrate MPEG audio file has no header that announces its length: a cut copy shows
    only as a last frame shorter than the ones before it (CBR frames differ by one padding byte)."""
    try:
        out = ffmpeg.probe(
            ffmpeg_name(path),
            read_intervals=f"{max(0.0, duration_s - 3):.3f}%",
            show_entries="packet=size",
            select_streams="a:0",
        )
    except ffmpeg.Error:
        return False
    sizes = [int(p["size"]) for p in out.get("packets", []) if p.get("size")]
    if len(sizes) < 4:
        return False
    body = sizes[-8:-1]
    return max(body) - min(body) <= 1 and sizes[-1] < min(body) - 1


def _not_audio(path: Path, stderr: bytes | None) -> str:
    """What to say about a file ffprobe cannot open: what it is where its first bytes tell (a text file or a
    web page saved under an audio name, a common failed download), else ffmpeg's reason without the path it
    repeats ("file:/x/ep.mp3: Invalid argument" says nothing about the file)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        head = b""
    what = _text_kind(head)
    reason = _last_line(stderr)
    for prefix in (ffmpeg_name(path) + ":", str(path) + ":"):
        reason = reason.removeprefix(prefix).strip()
    if what:
        return (
            f"not audio: ffmpeg found no audio stream in it; it is {what}; check that this is the episode's "
            "audio file (a failed download saves an error page under the episode's name)"
        )
    return f"not a readable audio/video file: ffmpeg found no audio stream in it ({reason})"


def _text_kind(head: bytes) -> str | None:
    """'a web page (HTML)' / 'a text file starting "..."' when these bytes are text, else None."""
    if not head or b"\0" in head:
        return None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not a character cut at the end of the 4 KiB read
            return None
        text = head[: exc.start].decode("utf-8")
    if sum(not (ch.isprintable() or ch in "\t\r\n") for ch in text) > len(text) // 100:
        return None
    start = text.lstrip().lower()
    if start.startswith(("<!doctype html", "<html")) or "<html" in start[:512]:
        return "a web page (HTML)"
    if start.startswith(("<?xml", "<rss")):
        return "an XML document"
    first = " ".join(text.split())[:40]
    return f'a text file starting "{first}"'


def _last_line(stderr: bytes | None) -> str:
    lines = [ln.strip() for ln in (stderr or b"").decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "ffmpeg failed without a message"


# Where ffmpeg's mono mix is this much quieter than the channels' difference, the channels cancel: a file wired
# out of phase. Independent channels (two speakers, one per side) mix 3 dB below either and one silent channel
# 6 dB below; cancelling channels 30 dB and more. Below the floor a block is silence either way.
CANCEL_DB = 15.0
CANCEL_FLOOR_DB = -55.0


def stream(
    path: Path, expected_s: float | None = None, warnings: list[str] | None = None, block_s: float = 5.0
) -> Iterator[np.ndarray]:
    """Yield float32 mono 16 kHz blocks of the file's first audio stream.

    What decodes is kept: a file that yields far less audio than its container
    announced (``expected_s``), or that ffmpeg gives up on part way, is a truncated
    file — its readable part is transcribed and a ``truncated:`` warning is
    appended to ``warnings``. AudioError only when ffmpeg fails before any audio.
    Decoder complaints that did not stop it (a damaged frame) are warnings too.
    A block whose channels cancel in the mono mix is their difference instead, with an ``out of phase:``
    warning (the module's docstring).
    """
    warnings = warnings if warnings is not None else []
    # One pass, three channels: ffmpeg's stereo pair and its mono mix. amerge orders them by layout (FL, FR,
    # FC); the FC branch is the very aformat conversion `-ac 1 -ar 16000` inserts, so the mix is unchanged.
    graph = (
        "[0:a:0]asplit=2[pair][mix];"
        f"[pair]aformat=sample_fmts=flt:sample_rates={SAMPLE_RATE}:channel_layouts=stereo[lr];"
        f"[mix]aformat=sample_fmts=flt:sample_rates={SAMPLE_RATE}:channel_layouts=mono[m];"
        "[lr][m]amerge=inputs=2[out]"
    )
    process = (
        ffmpeg.input(ffmpeg_name(path))
        .output("pipe:", format="f32le", acodec="pcm_f32le", filter_complex=graph, map="[out]")
        .global_args("-nostdin", "-hide_banner", "-loglevel", "error")
        .run_async(pipe_stdout=True, pipe_stderr=True)
    )
    errors: list[bytes] = []
    decoded, cancelled, worst_db = 0, 0, 0.0
    reader = threading.Thread(target=lambda: errors.append(process.stderr.read()), daemon=True)
    reader.start()
    frame_bytes = 3 * 4
    block_bytes = int(block_s * SAMPLE_RATE) * frame_bytes
    try:
        while True:
            data = process.stdout.read(block_bytes)
            if not data:
                break
            usable = len(data) - len(data) % frame_bytes
            frames = np.frombuffer(data[:usable], dtype=np.float32).reshape(-1, 3)
            decoded += len(frames)
            mono, gap_db = in_phase(frames)
            if gap_db is not None:
                cancelled += len(frames)
                worst_db = max(worst_db, gap_db)
            yield mono
    finally:
        process.stdout.close()
        code = process.wait()
        reader.join()
    stderr = b"".join(errors)
    got_s = decoded / SAMPLE_RATE
    if cancelled:
        warnings.append(
            f"out of phase: the two channels cancel in the mono mix (up to {worst_db:.0f} dB quieter than "
            f"their difference) in {cancelled / SAMPLE_RATE:.1f} s of {got_s:.1f} s; transcribed the left channel "
            "minus the right there (one channel's polarity is inverted in the file)"
        )
    if code != 0:
        if decoded == 0:
            raise AudioError(f"ffmpeg could not decode the file: {_last_line(stderr)}")
        warnings.append(f"truncated: ffmpeg stopped after {got_s:.1f} s ({_last_line(stderr)})")
    elif expected_s and got_s < expected_s - max(2.0, 0.05 * expected_s):
        detail = f" ({_last_line(stderr)})" if stderr.strip() else ""
        warnings.append(f"truncated: decoded {got_s:.1f} s of the {expected_s:.1f} s its header announces{detail}")
    elif stderr.strip():
        warnings.append(f"decoder: {_last_line(stderr)}")


def in_phase(frames: np.ndarray) -> tuple[np.ndarray, float | None]:
    """A block's mono audio from its (left, right, ffmpeg's mix) frames, and by how many dB the mix fell
    below the channels' difference where they cancel (None where the mix is the audio)."""
    mix = frames[:, 2].copy()
    side = (frames[:, 0] - frames[:, 1]) * np.float32(0.5)
    mix_db, side_db = rms_db(mix), rms_db(side)
    if side_db > CANCEL_FLOOR_DB and mix_db < side_db - CANCEL_DB:
        return side, side_db - mix_db
    return mix, None


def decode(path: Path, expected_s: float | None = None) -> np.ndarray:
    """The whole file as one array (for tests and short clips; the job runner streams)."""
    blocks = list(stream(path, expected_s))
    return np.concatenate(blocks) if blocks else np.zeros(0, np.float32)


def frame_db(samples: np.ndarray) -> np.ndarray:
    """Energy in dBFS of consecutive 20 ms frames."""
    n = len(samples) // ENERGY_FRAME
    if n == 0:
        return np.full(1, -120.0)
    frames = samples[: n * ENERGY_FRAME].reshape(n, ENERGY_FRAME).astype(np.float64)
    return 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)


def rms_db(samples: np.ndarray) -> float:
    if len(samples) == 0:
        return -120.0
    return float(10 * np.log10(np.mean(samples.astype(np.float64) ** 2) + 1e-12))


def choose_cut(samples: np.ndarray, opts: CutOptions) -> int:
    """Sample index in [min_s, max_s] where to cut: the middle of the longest silence in [prefer_s, max_s], else
    of the longest in [min_s, max_s], else the quietest 20 ms frame there (smoothed over 100 ms)."""
    db = frame_db(samples[: int(opts.max_s * SAMPLE_RATE)])
    threshold = max(np.percentile(db, 99) + opts.silence_db, -70.0)
    lo = int(opts.min_s * SAMPLE_RATE) // ENERGY_FRAME
    if lo >= len(db):
        return min(len(samples), int(opts.max_s * SAMPLE_RATE))
    shortest = opts.min_silence_s * SAMPLE_RATE / ENERGY_FRAME
    for start_s in dict.fromkeys((max(opts.prefer_s, opts.min_s), opts.min_s)):  # the fuller window first
        at = int(start_s * SAMPLE_RATE) // ENERGY_FRAME
        if at >= len(db):
            continue
        middle, frames = longest_run(_window_smooth(db, at) < threshold)
        if middle is not None and frames >= shortest:
            return (at + middle) * ENERGY_FRAME + ENERGY_FRAME // 2
    return (lo + int(np.argmin(_window_smooth(db, lo)))) * ENERGY_FRAME + ENERGY_FRAME // 2


def _window_smooth(db: np.ndarray, at: int) -> np.ndarray:
    """The frames' energy from ``at`` on, smoothed over 100 ms within that window (its edges see only it)."""
    return np.convolve(db[at:], np.ones(5) / 5, mode="same")


def longest_run(quiet: np.ndarray) -> tuple[int | None, int]:
    """The middle and length of the longest run of True (ties go to the later run: longer pieces)."""
    best, best_len, run_start = None, 0, None
    for i, q in enumerate(np.append(quiet, False)):
        if q and run_start is None:
            run_start = i
        elif not q and run_start is not None:
            if i - run_start >= best_len:
                best, best_len = (run_start + i) // 2, i - run_start
            run_start = None
    return best, best_len


def pause_cut(samples: np.ndarray, opts: CutOptions, speech: list[tuple[float, float]]) -> int | None:
    """Sample index in [min_s, max_s] where to cut: the middle of the latest pause between ``speech``
    spans (seconds) there — the longest pieces Whisper gets, never a cut inside speech. None when the
    window holds no such pause."""
    lo, hi = opts.min_s, min(opts.max_s, len(samples) / SAMPLE_RATE)
    bounds = [0.0, *(t for span in speech for t in span), hi]
    pauses = [(a, b) for a, b in zip(bounds[::2], bounds[1::2]) if b - a >= opts.min_silence_s]
    middles = [(a + b) / 2 for a, b in pauses if lo <= (a + b) / 2 <= hi]
    return int(max(middles) * SAMPLE_RATE) if middles else None


def cut(blocks: Iterator[np.ndarray], opts: CutOptions, voice=None) -> Iterator[Piece]:
    """Cut a stream of blocks into pieces; the last piece holds whatever remains. ``voice``: a function
    giving the speech spans (seconds) of a window, for ``opts.at_pauses``."""
    max_n = int(opts.max_s * SAMPLE_RATE)
    buf = np.zeros(0, np.float32)
    offset, index = 0, 0
    for block in blocks:
        buf = np.concatenate([buf, block])
        while len(buf) > max_n:
            at = pause_cut(buf[:max_n], opts, voice(buf[:max_n])) if opts.at_pauses and voice else None
            if at is None:
                at = choose_cut(buf, opts)
            yield Piece(index, offset, buf[:at].copy())
            buf, offset, index = buf[at:], offset + at, index + 1
    if len(buf):
        yield Piece(index, offset, buf.copy())


def pieces(
    path: Path,
    opts: CutOptions = CutOptions(),
    expected_s: float | None = None,
    warnings: list[str] | None = None,
    voice=None,
) -> Iterator[Piece]:
    return cut(stream(path, expected_s, warnings), opts, voice)
