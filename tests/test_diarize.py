"""Speaker labels (--diarize): features, clustering and labelling on planted data (fast), then real voices
from ../shared/speech through the whole CLI (slow): who said it, how many, in every output, and a finished
job labelled later without decoding anything again."""

from __future__ import annotations

import json
import re
from pathlib import Path

import conftest
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from helpers import JOB_ARGS, lines, podscribe, run_here, write_wav
from pipeline.audio import media
from pipeline.diarize import cluster, short, turns
from pipeline.diarize.diarizer import Stream
from pipeline.diarize.options import DiarizeOptions
from pipeline.facts.errors import UsageProblem
from pipeline.facts.records import Turn
from pipeline.outputs.cues import CueRules, build_cues
from pipeline.outputs.export import to_json, to_srt, to_tsv, to_txt, to_vtt

# -- fast: pure parts ------------------------------------------------------------------------------------------


def test_mel_features_match_a_reference_spectrogram():
    """resemblyzer computes its features with librosa; transformers' numpy spectrogram is the same recipe
    (centred frames, zero padding, periodic Hann, power 2, Slaney mel) written independently."""
    from transformers.audio_utils import spectrogram, window_function

    from pipeline.diarize.embed import mel_filters, mel_spectrogram

    x = np.random.default_rng(0).standard_normal(24_000).astype(np.float32) * 0.1
    want = spectrogram(
        x,
        window_function(400, "hann"),
        400,
        160,
        power=2.0,
        center=True,
        pad_mode="constant",
        mel_filters=mel_filters().numpy().astype(np.float64),
        mel_floor=0.0,
    )
    got = mel_spectrogram(torch.from_numpy(x)[None])[0].numpy().T
    assert got.shape == want.shape == (40, 151)
    assert np.abs(got - want).max() <= 1e-5 * want.max()
    # Slaney filters: the first band starts at 0 Hz, the last ends at 8 kHz, each with unit area in Hz
    bank = mel_filters().numpy()
    assert bank[:, 0].argmax() < bank[:, -1].argmax()


def planted(speakers: list[int], seed: int = 0, noise: float = 0.35) -> np.ndarray:
    """Window embeddings: each speaker a random direction in 256-d, each window that plus noise."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(speakers) + 1, 256))
    return np.array([centres[s] + noise * rng.standard_normal(256) * np.sqrt(1 / 256) * 16 for s in speakers])


@pytest.mark.parametrize("n_speakers", [1, 2, 3, 5])
def test_clustering_finds_the_planted_speakers_and_their_count(n_speakers):
    rng = np.random.default_rng(n_speakers)
    truth = [int(s) for s in rng.integers(0, n_speakers, 40) for _ in range(rng.integers(2, 8))]
    labels = cluster.cluster(planted(truth, seed=n_speakers))
    assert labels.max() + 1 == n_speakers
    pairs = set(zip(truth, labels.tolist()))
    assert len(pairs) == n_speakers  # one label per speaker, one speaker per label
    assert labels[0] == 0  # numbered by first appearance


def test_a_fixed_count_is_honoured_and_a_range_bounds_the_estimate():
    truth = [s for s in (0, 1, 2) * 10 for _ in range(4)]
    embeddings = planted(truth, seed=3)
    assert cluster.cluster(embeddings, exact=2).max() + 1 == 2
    assert cluster.cluster(embeddings, exact=4).max() + 1 == 4
    assert cluster.cluster(embeddings, max_speakers=2).max() + 1 == 2
    assert cluster.cluster(embeddings[:1]).tolist() == [0]
    assert cluster.cluster(embeddings[:0]).tolist() == []


def test_short_windows_take_the_nearest_voice_and_make_no_speaker_of_their_own():
    truth = [s for s in (0, 1) * 10 for _ in range(5)]
    embeddings = planted([*truth, 0, 1, 2], seed=5)  # then short windows: voice 0, voice 1, a third voice
    embeddings = np.concatenate([embeddings, np.zeros((1, 256))])  # and one too short to carry a vector
    reliable = np.array([True] * len(truth) + [False] * 4)
    labels = cluster.cluster(embeddings, reliable=reliable)
    assert labels.max() + 1 == 2
    assert labels[len(truth)] == labels[0] and labels[len(truth) + 1] == labels[5]  # the nearest centre
    assert labels[-1] == labels[len(truth) - 1]  # no vector: the nearest reliable window in time


def test_windows_cover_each_region_and_a_short_region_is_its_own_window():
    spans = turns.windows([(0.0, 1.0), (2.0, 6.0), (6.5, 8.0)], 1.5, 0.75)
    assert spans[0] == (0.0, 1.0)
    inside = [s for s in spans if 2.0 <= s[0] < 6.0]
    assert inside[0][0] == 2.0 and inside[-1][1] == 6.0
    assert all(abs(b - a - 1.5) < 1e-9 for a, b in inside)
    assert all(b[0] - a[0] <= 0.75 + 1e-9 for a, b in zip(inside, inside[1:]))
    assert spans[-1] == (6.5, 8.0)


def test_turns_split_a_region_between_its_windows():
    regions = [(0.0, 6.0)]
    spans = turns.windows(regions, 1.5, 0.75)
    labels = [0 if (a + b) / 2 < 3.0 else 1 for a, b in spans]
    got = turns.turns(regions, spans, labels)
    assert [t.speaker for t in got] == ["Speaker 1", "Speaker 2"]
    assert got[0].start_s == 0.0 and got[-1].end_s == 6.0
    assert abs(got[0].end_s - 3.0) <= 0.75 and got[0].end_s == got[1].start_s


def word(text, start, end):
    return {"word": text, "start_s": start, "end_s": end, "probability": 0.9, "speaker": None}


def segment(i, start, end, text, words=None):
    return {"segment": i, "start_s": start, "end_s": end, "text": text, "words": words, "flags": [], "piece": 0}


def test_a_segment_whose_words_change_speaker_is_split_there_and_keeps_its_text():
    words = [
        word(" Is", 0.0, 0.3),
        word(" it?", 0.3, 0.8),
        word(" Yes,", 1.0, 1.4),
        word(" it", 1.4, 1.6),
        word(" is.", 1.6, 2.0),
    ]
    rows = [
        segment(0, 0.0, 2.0, "Is it? Yes, it is.", words),
        segment(1, 3.0, 4.0, "Good.", [word(" Good.", 3.0, 4.0)]),
    ]
    who = [Turn(0.0, 0.9, "Speaker 1"), Turn(0.9, 2.0, "Speaker 2"), Turn(3.0, 4.0, "Speaker 1")]
    got = turns.label_rows(rows, who)
    assert [(r["segment"], r["speaker"], r["text"]) for r in got] == [
        (0, "Speaker 1", "Is it?"),
        (1, "Speaker 2", "Yes, it is."),
        (2, "Speaker 1", "Good."),
    ]
    assert got[0]["start_s"] == 0.0 and got[1]["end_s"] == 2.0 and got[0]["end_s"] <= got[1]["start_s"]
    assert all(w["speaker"] == r["speaker"] for r in got for w in r["words"])
    assert " ".join(r["text"] for r in got) == " ".join(r["text"] for r in rows)


def test_words_that_do_not_spell_the_whole_text_never_split_it_away():
    """The alignment may attach fewer words than the text has: a split would drop the rest."""
    rows = [segment(0, 0.0, 4.0, "A B C D", [word(" A", 0.0, 0.5), word(" B", 1.5, 2.0)])]
    who = [Turn(0.0, 1.0, "Speaker 1"), Turn(1.0, 4.0, "Speaker 2")]
    got = turns.label_rows(rows, who)
    assert [(r["text"], r["speaker"]) for r in got] == [("A B C D", "Speaker 2")]
    assert [w["speaker"] for w in got[0]["words"]] == ["Speaker 1", "Speaker 2"]


def test_a_labelled_row_drops_the_warning_of_an_earlier_failed_labelling():
    from pipeline.storage.tables import file_labelled

    row = {"warnings": "truncated: 3 s; diarization failed: OSError: gone", "n_segments": 1, "n_flagged": 0}
    got = file_labelled(row, [{"flags": []}], 1, "abc")
    assert got["warnings"] == "truncated: 3 s" and got["n_speakers"] == 1 and got["speaker_config"] == "abc"


def test_without_words_a_segment_takes_the_speaker_with_most_time():
    rows = [segment(0, 0.0, 4.0, "Two voices, no word timings."), segment(1, 9.0, 9.5, "Far from any turn.")]
    who = [Turn(0.0, 1.0, "Speaker 2"), Turn(1.0, 4.0, "Speaker 1"), Turn(6.0, 8.0, "Speaker 2")]
    got = turns.label_rows(rows, who)
    assert [r["speaker"] for r in got] == ["Speaker 1", "Speaker 2"]  # most time; then the nearest turn
    assert [r["text"] for r in got] == [r["text"] for r in rows]


def test_streamed_windows_equal_slices_of_the_whole_signal_and_memory_stays_bounded():
    x = np.arange(16_000 * 60, dtype=np.float32)
    stream = Stream(x[i : i + 5 * 16_000] for i in range(0, len(x), 5 * 16_000))
    spans = [(0.0, 1.5), (0.75, 2.25), (4.9, 5.2), (9.0, 12.5), (58.5, 61.0)]  # the last runs past the end
    for lo, hi in spans:
        got = stream.get(lo, hi)
        assert np.array_equal(got, x[int(lo * 16_000) : int(hi * 16_000)])
        stream.forget(lo)
        assert len(stream.buffer) <= (hi - lo + 5) * 16_000  # what lies between the span and the block's end
    assert len({len(stream.get(59.0 + k / 7, 59.0 + k / 7 + 0.5)) for k in range(3)}) == 1  # one length, any start


def test_windows_of_many_lengths_run_together_and_each_embeds_as_alone():
    """Short stretches give windows of lengths of their own: they run as one batch (zeros after a window and the
    LSTM stopping at its own last frame), and each vector is the one the window gets alone."""
    from pipeline.diarize.embed import SpeakerEncoder

    torch.manual_seed(0)
    encoder = SpeakerEncoder().eval()  # any weights: the batching must not change what a window gets
    rng = np.random.default_rng(0)
    lengths = (24_000, 4_100, 24_000, 9_000, 24_000, 1_700, 24_000, 12_345, 800)  # four full windows, four odd ones
    windows = [rng.standard_normal(n).astype(np.float32) * 0.1 for n in lengths]
    calls = []
    encoder.lstm.register_forward_hook(lambda *_: calls.append(1))
    together = encoder.embed(windows)
    assert len(calls) == 2  # the full windows as they are, the odd lengths packed together
    alone = np.concatenate([encoder.embed([w]) for w in windows])
    assert np.abs(together - alone).max() < 1e-5
    assert not together[-1].any() and all(together[:-1].any(axis=1))  # under 0.1 s: no voice to read


class PlantedVoices:
    """An encoder stand-in: a window's vector is the voice at its centre (speaker A before ``change_s``, B after)."""

    def __init__(self, change_s: float):
        self.change_s, self.calls = change_s, []

    def embed(self, windows):
        self.calls.append(len(windows))
        a, b = np.eye(256, dtype=np.float32)[:2]
        return np.array([a if w[len(w) // 2] / 16_000 < self.change_s else b for w in windows])


def test_windows_are_refined_only_where_the_voice_changes():
    from pipeline.diarize.diarizer import Diarizer

    diarizer = Diarizer.__new__(Diarizer)
    diarizer.options, diarizer._encoder = DiarizeOptions(), PlantedVoices(change_s=10.3)
    x = np.arange(16_000 * 30, dtype=np.float32)  # sample values are their own index: the voice is readable
    regions = [(0.0, 20.0), (22.0, 29.0)]
    spans, vectors = diarizer.embed(Stream(x[i : i + 80_000] for i in range(0, len(x), 80_000)), regions)
    coarse = turns.windows(regions, 1.5, 1.5)
    assert len(spans) == len(coarse) + 3  # one change, three windows more
    assert spans == sorted(spans) and len(vectors) == len(spans)
    labels = cluster.cluster(vectors)
    got = turns.turns(regions, spans, [int(v) for v in labels])
    change = [t.end_s for t in got[:-1] if t.end_s < 20.0]
    assert len(change) == 1 and abs(change[0] - 10.3) <= 1.5 / 4


def test_stretches_are_cut_at_pauses_and_padded_only_into_them():
    rows = [
        segment(
            0,
            0.0,
            4.5,
            "So we went. Right. And then soon, then home.",
            [
                word(" So", 0.0, 0.3),
                word(" we", 0.35, 0.6),
                word(" went.", 0.6, 1.4),
                word(" Right.", 1.7, 2.1),
                word(" And", 2.3, 2.5),
                word(" then", 2.5, 2.8),
                word(" soon,", 2.8, 3.2),
                word(" then", 3.6, 4.0),
                word(" home.", 4.0, 4.5),
            ],
        )
    ]
    got = short.stretches(rows)
    assert [(p.start_s, p.end_s) for p in got] == [(0.0, 1.4), (1.7, 2.1), (2.3, 3.2), (3.6, 4.5)]
    # padded into the pause around, half of it at most: never into the neighbour's words
    for before, p, after in zip(got, got[1:], got[2:]):
        assert before.end_s < p.lo_s <= p.start_s and p.end_s <= p.hi_s < after.start_s
    assert got[1].lo_s == pytest.approx(1.55) and got[1].hi_s == pytest.approx(2.2)
    assert [p.new_sentence for p in got] == [True, True, True, False]  # "then" goes on a sentence


def test_a_short_turn_takes_a_clear_voice_and_weak_evidence_follows_the_rule():
    a, b = np.eye(2, 8, dtype=np.float32)
    ids, centre = np.array([0, 1]), np.stack([a, b])
    unclear = (a + 1.02 * b) / np.linalg.norm(a + 1.02 * b)  # nearer B, by less than the margin
    vectors = np.stack([b, unclear])
    who = [0, 0, 0]  # A, a short stretch, A
    for rule, evidence, new_sentence, want in [
        ("sentence", 0, False, 1),  # a clear voice decides, whatever the text
        ("sentence", 1, False, 0),  # weak, goes on a sentence: the speaker around it
        ("sentence", 1, True, 1),  # weak, but a new sentence after a pause: the nearest voice
        ("keep", 1, True, 0),
        ("nearest", 1, False, 1),
    ]:
        got = short.decide(who, [None, evidence, None], vectors, [True, new_sentence, True], ids, centre, rule)
        assert got == [0, want, 0], (rule, evidence, new_sentence)


class VoicesAt:
    """An encoder stand-in: a window's vector is the voice with most samples in it (the samples hold their own
    index, so the time is readable): what a mixed window of a real encoder leans to."""

    def __init__(self, voices: list[tuple[float, float, int]]):
        self.voices = voices

    def embed(self, windows):
        out = np.zeros((len(windows), 256), np.float32)
        for i, w in enumerate(windows):
            t = w / 16_000
            count = [np.count_nonzero((t >= lo) & (t < hi)) for lo, hi, _ in self.voices]
            out[i, self.voices[int(np.argmax(count))][2]] = 1.0
        return out


def test_a_short_turn_between_long_ones_is_heard_on_its_own_and_splits_its_segment():
    from pipeline.diarize.diarizer import Diarizer

    truth = [(0.5, 8.0, 0), (8.3, 8.7, 1), (9.0, 12.0, 0), (12.3, 16.0, 1)]
    words, texts = [], {0: "and so on", 1: "Right."}
    for lo, hi, who in truth:
        n = max(1, int((hi - lo) / 0.5))
        words += [
            word(
                f" {texts[who].split()[k % len(texts[who].split())]}",
                lo + k * (hi - lo) / n,
                lo + (k + 1) * (hi - lo) / n,
            )
            for k in range(n)
        ]
    text = "".join(w["word"] for w in words).strip()
    rows = [segment(0, 0.5, 16.0, text, words)]
    diarizer = Diarizer.__new__(Diarizer)
    diarizer.options, diarizer._encoder = DiarizeOptions(), VoicesAt(truth)
    x = np.arange(16_000 * 17, dtype=np.float32)
    import pipeline.diarize.diarizer as module

    real_stream = module.media.stream
    module.media.stream = lambda path, duration_s=None: (x[i : i + 80_000] for i in range(0, len(x), 80_000))
    try:
        got, n_speakers = diarizer.label(Path("unused.wav"), rows)
    finally:
        module.media.stream = real_stream
    assert n_speakers == 2
    said = {round(w["start_s"], 3): w["speaker"] for r in got for w in r["words"]}
    for lo, hi, who in truth:
        assert {said[round(w["start_s"], 3)] for w in words if lo <= w["start_s"] < hi} == {f"Speaker {who + 1}"}
    assert [r["text"] for r in got][1] == "Right."  # the segment is split at both changes
    assert [r["speaker"] for r in got] == ["Speaker 1", "Speaker 2", "Speaker 1", "Speaker 2"]


def test_diarize_turns_word_timings_on_unless_the_job_was_decoded_without_them(tmp_path):
    from pipeline.cli.settings import job_options, merge_settings

    def words(out, **flags):
        flags = {"diarize": True, **flags}
        return job_options(out, merge_settings(flags), flags).decode.word_timestamps

    assert words(tmp_path / "new") is True
    assert words(tmp_path / "new", word_timestamps=False) is False
    assert words(tmp_path / "new", diarize=False) is False
    old = tmp_path / "old"
    old.mkdir()
    (old / "job.json").write_text(json.dumps({"config": {"decode": {"word_timestamps": False}}}))
    assert words(old) is False  # labels added later never decode the job again


def labelled_rows():
    return [
        {
            **segment(0, 0.5, 2.5, "Welcome back.", [word(" Welcome", 0.5, 1.2), word(" back.", 1.2, 2.5)]),
            "speaker": "Speaker 1",
        },
        {
            **segment(1, 2.7, 4.0, "Thanks <you>.", [word(" Thanks", 2.7, 3.2), word(" <you>.", 3.2, 4.0)]),
            "speaker": "Speaker 2",
        },
        {**segment(2, 4.2, 6.0, "Right.", [word(" Right.", 4.2, 6.0)]), "speaker": "Speaker 2"},
    ]


def test_outputs_carry_the_speakers_and_each_can_leave_them_out():
    rows = labelled_rows()
    cues, timed = build_cues(rows, CueRules(), 7.0)
    assert [c.speaker for c in cues] == ["Speaker 1", "Speaker 2", "Speaker 2"]  # a cue never spans a change
    vtt = to_vtt(cues, timed)
    assert re.findall(r"<v ([^>]+)>", vtt) == ["Speaker 1", "Speaker 2", "Speaker 2"]
    assert "<v Speaker 2>Thanks &lt;you&gt;." in vtt
    srt = to_srt(cues)
    assert srt.count("[Speaker 1] ") == 1 and srt.count("[Speaker 2] ") == 1  # at each change only
    assert to_txt(rows).splitlines() == ["Speaker 1: Welcome back.", "", "Speaker 2: Thanks <you>. Right."]
    assert to_tsv(rows).splitlines()[:2] == ["start\tend\ttext\tspeaker", "500\t2500\tWelcome back.\tSpeaker 1"]
    doc = json.loads(to_json({"path": "x", "file_id": "f", "duration_s": 7.0, "language": "en"}, rows, cues, timed))
    assert doc["speakers"] == ["Speaker 1", "Speaker 2"]
    assert [s["speaker"] for s in doc["segments"]] == ["Speaker 1", "Speaker 2", "Speaker 2"]
    assert doc["segments"][0]["words"][0]["speaker"] is None or doc["segments"][0]["words"][0]["speaker"]
    off = CueRules(speakers=False)
    plain, _ = build_cues(rows, off, 7.0)
    assert "<v" not in to_vtt(plain) and "[Speaker" not in to_srt(plain)
    assert "Speaker" not in to_txt(rows, off) + to_tsv(rows, off)
    assert "speaker" not in to_json(
        {"path": "x", "file_id": "f", "duration_s": 7.0, "language": "en"}, rows, plain, True, off
    )


def test_options_are_checked_and_pyannote_says_what_is_missing(monkeypatch):
    with pytest.raises(ValueError, match="speaker range"):
        DiarizeOptions(min_speakers=3, max_speakers=2)
    with pytest.raises(ValueError, match="diarizer"):
        DiarizeOptions(backend="magic")
    import builtins

    real_import = builtins.__import__

    def no_pyannote(name, *args, **kwargs):
        if name.startswith("pyannote"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyannote)
    from pipeline.diarize.pyannote import PyannoteBackend

    with pytest.raises(UsageProblem, match=r"pip install 'podscribe\[pyannote\]'"):
        PyannoteBackend(DiarizeOptions(backend="pyannote"))


# -- slow: real voices ---------------------------------------------------------------------------------------

LJ = [f"ljspeech_coqui/wavs/LJ001-00{i:02d}.wav" for i in range(1, 12)]
MAN = [
    f"librispeech_kennethwang/LibriSpeech/test-clean/1089/{p}.flac"
    for p in (
        "134686/1089-134686-0000",
        "134686/1089-134686-0001",
        "134691/1089-134691-0000",
        "134691/1089-134691-0001",
    )
]
SB = [f"speechbrain/spk1_snt{i}.wav" for i in range(1, 6)]
# Turns of three readers (LJSpeech's, a LibriSpeech reader, a SpeechBrain speaker), 0.6-1.2 s pauses; LJ001-0002
# (1.9 s), LJ001-0008 (1.8 s) and 1089-134691-0000 (2.1 s) are the short turns.
TURNS = [
    ("lj", LJ[0]),
    ("man", MAN[0]),
    ("sb", SB[0]),
    ("lj", LJ[1]),
    ("sb", SB[1]),
    ("man", MAN[2]),
    ("lj", LJ[7]),
    ("man", MAN[1]),
    ("sb", SB[2]),
    ("lj", LJ[3]),
    ("sb", SB[3]),
    ("man", MAN[3]),
    ("lj", LJ[4]),
    ("sb", SB[4]),
]


@pytest.mark.model
def test_two_voices_in_quick_exchange_are_two_speakers_when_the_eigengap_says_one():
    """LJSpeech's reader and a LibriSpeech reader trading 36 turns, many of them backchannels: the windows of one
    voice fall into many small groups, and the eigengap's count is 1. A count one more is kept while its clusters'
    centres all stay further apart than one voice's (cluster.SAME_SPEAKER)."""
    from bench import exchanges
    from pipeline.diarize.diarizer import RELIABLE_S, Diarizer

    plan = exchanges.plan(["lj", "man"], 36, 11, short_share=0.5, tiny_share=0.5, same_share=0.4)
    x, truth = exchanges.build(conftest.SPEECH, *plan, seed=11)
    diarizer = Diarizer(DiarizeOptions())
    spans, vectors = diarizer.embed(
        Stream(x[i : i + 80_000] for i in range(0, len(x), 80_000)), [(t.start_s, t.end_s) for t in truth]
    )
    labels = cluster.cluster(vectors, reliable=np.array([hi - lo >= RELIABLE_S for lo, hi in spans]))
    assert labels.max() + 1 == 2
    who = [next(t.who for t in truth if t.start_s - 1e-3 <= 0.5 * (lo + hi) <= t.end_s + 1e-3) for lo, hi in spans]
    long = [k for k, (lo, hi) in enumerate(spans) if hi - lo >= 1.0]
    agree = max(
        sum((labels[k] == 0) == (who[k] == "lj") for k in long), sum((labels[k] == 1) == (who[k] == "lj") for k in long)
    )
    assert agree >= 0.95 * len(long)


def build(path: Path, parts: list[tuple[str, str]]) -> list[tuple[float, float, str]]:
    """Join clips (16 kHz) with pauses; returns the truth: (start_s, end_s, who) per clip."""
    rng = np.random.default_rng(7)
    pieces, truth, t = [], [], 0.5
    pieces.append(np.zeros(8000, np.float32))
    for who, rel in parts:
        x = media.decode(conftest.SPEECH / rel)
        truth.append((t, t + len(x) / 16_000, who))
        pause = float(rng.uniform(0.6, 1.2))
        pieces += [x, np.zeros(int(pause * 16_000), np.float32)]
        t += len(x) / 16_000 + pause
    write_wav(path, np.concatenate(pieces))
    return truth


def right_share(segments: list[dict], truth: list[tuple[float, float, str]]) -> float:
    """Share of the segments' speech time labelled with the right speaker, under the best one-to-one mapping."""
    import itertools

    time: dict[tuple[str, str], float] = {}
    total = 0.0
    for seg in segments:
        spans = [(w["start_s"], w["end_s"], w.get("speaker") or seg["speaker"]) for w in seg["words"] or ()] or [
            (seg["start_s"], seg["end_s"], seg["speaker"])
        ]
        for lo, hi, label in spans:
            for a, b, who in truth:
                overlap = min(hi, b) - max(lo, a)
                if overlap > 0:
                    time[(who, label)] = time.get((who, label), 0.0) + overlap
                    total += overlap
    people = sorted({w for w, _ in time})
    labels = sorted({lab for _, lab in time})
    best = max(
        sum(time.get((p, lab), 0.0) for p, lab in zip(people, perm))
        for perm in itertools.permutations(labels + [None] * len(people), len(people))
    )
    return best / total


@pytest.fixture(scope="module")
def conversation(clips, tmp_path_factory):
    folder = tmp_path_factory.mktemp("conversation")
    path = folder / "three_voices.wav"
    return path, build(path, TURNS)


def read_segments(out: Path) -> list[dict]:
    return sorted(pq.read_table(out / "segments").to_pylist(), key=lambda s: s["segment"])


@pytest.mark.model
def test_three_voices_labelled_later_without_decoding_again(conversation, cache_dir, tmp_path):
    """A finished job gets --diarize: its files are labelled, no piece is decoded again, the text stays; the
    labels are right for >= 95% of the speech time with 3 speakers found; the outputs carry them; changing
    --num-speakers relabels; leaving --diarize out keeps the job's labels, --no-diarize on a diarized job is refused. (Deaths counted on a claim no
    longer fail a labelling by themselves: a file a process died on is labelled alone in a watched child,
    tests/test_deaths.py.)"""
    path, truth = conversation
    out, trace = tmp_path / "job", tmp_path / "trace"
    args = [*JOB_ARGS, "--word-timestamps"]
    assert run_here(out, [path], cache_dir, None, args=args)[0] == 0
    before = read_segments(out)
    assert all(s["speaker"] is None for s in before)

    code, stdout, stderr = run_here(out, [path], cache_dir, trace, "--diarize", "--subtitles", "vtt,json", args=args)
    assert code == 0, stderr
    assert "given speaker labels: 1" in stdout
    assert not [line for line in lines(trace) if line.startswith("decoded")]  # labels only
    after = read_segments(out)
    assert " ".join(s["text"] for s in after).split() == " ".join(s["text"] for s in before).split()
    files = pq.read_table(out / "files").to_pylist()
    assert files[0]["n_speakers"] == 3 and files[0]["n_segments"] == len(after)
    assert right_share(after, truth) >= 0.95

    vtt = (out / "subtitles" / "three_voices.vtt").read_text()
    voices = re.findall(r"<v ([^>]+)>", vtt)
    assert set(voices) == {"Speaker 1", "Speaker 2", "Speaker 3"}
    import webvtt

    assert len(webvtt.read(str(out / "subtitles" / "three_voices.vtt"))) == len(voices)  # every cue has its voice
    doc = json.loads((out / "subtitles" / "three_voices.json").read_text())
    assert doc["speakers"] == ["Speaker 1", "Speaker 2", "Speaker 3"]
    assert {s["speaker"] for s in doc["segments"]} == set(doc["speakers"])
    plain = tmp_path / "plain"
    result = podscribe(
        "export", str(out), "-f", "txt,vtt", "--no-speaker-labels", "-o", str(plain), cache_dir=cache_dir
    )
    assert result.returncode == 0, result.stderr
    assert "Speaker" not in (plain / "three_voices.txt").read_text() + (plain / "three_voices.vtt").read_text()

    code, _, stderr = run_here(out, [path], cache_dir, trace, "--diarize", "--num-speakers", "2", args=args)
    assert code == 0, stderr
    assert {s["speaker"] for s in read_segments(out)} == {"Speaker 1", "Speaker 2"}
    assert pq.read_table(out / "files").to_pylist()[0]["n_speakers"] == 2

    code, _, stderr = run_here(out, [path], cache_dir, trace, args=args)  # not asked: the job's own value
    assert code == 0, stderr
    assert {s["speaker"] for s in read_segments(out)} == {"Speaker 1", "Speaker 2"}
    code, _, stderr = run_here(out, [path], cache_dir, None, "--no-diarize", args=args)
    assert code == 4 and "diarize" in stderr
    (out / "job.json").unlink()  # lost: the rows' labels still say how the job was made
    code, _, stderr = run_here(out, [path], cache_dir, None, args=args)
    assert code == 4 and "carry speaker labels" in stderr


@pytest.mark.model
def test_diarize_added_after_an_input_left_its_folder_labels_the_rest_and_names_the_one_left_unlabelled(
    clips, cache_dir, tmp_path
):
    """A finished two-file job gets --diarize after one input was moved away: the other is labelled; the one
    whose audio cannot be read keeps its transcript, and the run and status both name it as unlabelled."""
    inputs = sorted((c.path for c in clips if c.language == "en" and c.duration_s < 4), key=lambda p: p.name)[:2]
    moved, kept = tmp_path / "moved.wav", tmp_path / "kept.wav"
    moved.write_bytes(inputs[0].read_bytes())
    kept.write_bytes(inputs[1].read_bytes())
    out = tmp_path / "job"
    assert run_here(out, [moved, kept], cache_dir, None)[0] == 0
    moved.rename(tmp_path / "elsewhere.wav")
    code, stdout, stderr = run_here(out, [moved, kept], cache_dir, None, "--diarize")
    assert code == 0 and "given speaker labels: 1" in stdout and "with warnings: 1" in stdout, stdout + stderr
    assert f"warning: {moved}: its audio cannot be read now" in stderr and "no speaker labels" in stderr, stderr
    rows = {r["path"]: r for r in pq.read_table(out / "files").to_pylist()}
    assert rows[str(kept)]["speaker_config"] and not rows[str(moved)]["speaker_config"]
    assert rows[str(moved)]["status"] == "done", "its transcript was lost"
    status = podscribe("status", str(out), cache_dir=cache_dir)
    assert "without the job's speaker labels" in status.stdout, status.stdout
    assert f"{moved} (its audio cannot be read now)" in status.stdout, status.stdout


@pytest.mark.model
def test_one_reader_is_one_speaker_and_a_job_diarizes_as_it_goes(clips, cache_dir, tmp_path):
    path = tmp_path / "one_voice.wav"
    build(path, [("lj", p) for p in LJ[:8]])
    out = tmp_path / "job"
    result = podscribe("transcribe", "--out", str(out), *JOB_ARGS, "--diarize", "--", str(path), cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr
    files = pq.read_table(out / "files").to_pylist()
    assert files[0]["n_speakers"] == 1 and files[0]["speaker_config"]
    assert {s["speaker"] for s in read_segments(out)} == {"Speaker 1"}


@pytest.mark.model
def test_speaker_options_without_diarize_and_a_missing_backend_are_refused_before_anything_is_made(
    clips, cache_dir, tmp_path
):
    clip = conftest.SPEECH / "openai_whisper" / "jfk.flac"
    out = tmp_path / "job"
    result = podscribe(
        "transcribe", "--out", str(out), *JOB_ARGS, "--num-speakers", "2", str(clip), cache_dir=cache_dir
    )
    assert result.returncode == 2 and "add --diarize" in result.stderr and not out.exists()
    result = podscribe(
        "transcribe",
        "--out",
        str(out),
        *JOB_ARGS,
        "--diarize",
        "--diarizer",
        "pyannote",
        str(clip),
        cache_dir=cache_dir,
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'podscribe[pyannote]'" in result.stderr and not out.exists()


# Two and three readers in quick exchange (bench/exchanges.py cuts the short turns at the clips' own pauses):
# long turns with turns of 0.3-1.0 s between them, 0.2-0.7 s pauses, as in real talk.
QUICK = (
    ["lj", "man", "lj", "man", "sb1", "lj", "man", "sb1", "lj", "sb1", "man", "lj"],
    ["long", "short", "long", "long", "short", "long", "short", "long", "short", "long", "short", "long"],
)
BASE_ARGS = ["--model", "base", "-q"]


def spoken_by(truth, start_s: float, end_s: float) -> str | None:
    middle = 0.5 * (start_s + end_s)
    return next((t.who for t in truth if t.start_s - 0.1 <= middle <= t.end_s + 0.1), None)


@pytest.mark.model
def test_quick_exchanges_every_short_turn_gets_its_speaker_and_splits_its_segment(clips, cache_dir, tmp_path):
    """Short turns by three real voices, one of them inside a segment the decoder made: labelled later (nothing
    decoded again), each short turn gets its reader's label, the count is right, and no segment holds words of
    two readers."""
    from bench import exchanges

    x, truth = exchanges.build(conftest.SPEECH, *QUICK, seed=5)
    assert {round(t.end_s - t.start_s, 1) for t in truth if t.kind == "short"} <= {
        0.3,
        0.4,
        0.5,
        0.6,
        0.7,
        0.8,
        0.9,
        1.0,
    }
    path, out, trace = tmp_path / "quick.wav", tmp_path / "job", tmp_path / "trace"
    write_wav(path, x)
    args = [*BASE_ARGS, "--word-timestamps"]
    code, _, stderr = run_here(out, [path], cache_dir, None, args=args)
    assert code == 0, stderr
    before = read_segments(out)
    inside = [
        t
        for t in truth
        if t.kind == "short" and any(s["start_s"] < t.start_s - 0.1 and s["end_s"] > t.end_s + 0.1 for s in before)
    ]
    assert inside, "a short turn inside a decoded segment"

    code, _, stderr = run_here(out, [path], cache_dir, trace, "--diarize", args=args)
    assert code == 0, stderr
    assert not [line for line in lines(trace) if line.startswith("decoded")]
    after = read_segments(out)
    assert pq.read_table(out / "files").to_pylist()[0]["n_speakers"] == 3
    # each reader's label: the one on most of its long turns' words
    votes: dict[str, dict[str, int]] = {}
    for s in after:
        for w in s["words"]:
            who = spoken_by([t for t in truth if t.kind == "long"], w["start_s"], w["end_s"])
            if who:
                votes.setdefault(who, {}).setdefault(w["speaker"], 0)
                votes[who][w["speaker"]] += 1
    label = {who: max(v, key=v.get) for who, v in votes.items()}
    assert len(set(label.values())) == 3
    shorts = [t for t in truth if t.kind == "short"]
    heard = [(t, [w for s in after for w in s["words"] if spoken_by([t], w["start_s"], w["end_s"])]) for t in shorts]
    heard = [(t, said) for t, said in heard if said]
    assert len(heard) >= len(shorts) - 1  # the decoder may drop one 0.3 s turn: no words, nothing to label
    for t, said in heard:
        assert {w["speaker"] for w in said} == {label[t.who]}, (t, said)
    for s in after:  # segments split at every change: one reader's words in each
        readers = {spoken_by(truth, w["start_s"], w["end_s"]) for w in s["words"]} - {None}
        assert len(readers) <= 1 and {w["speaker"] for w in s["words"]} == {s["speaker"]}, s
