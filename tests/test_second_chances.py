"""Second chances on real weights (pipeline/decode/recover.py): speech greedy Whisper drops comes back,
a looping piece is decoded again, and both give the same tokens with and without an assistant.

The constructions are found, not designed: `base` decodes a loud sentence followed 0.3 s later by a
second speaker 20 dB quieter (a caller on a weak line) as the first sentence alone; tiny.en loops on
27 s of speech under white noise at -8 dB SNR. Each test first checks that the construction still
fails without the second chance, so it cannot pass by the failure going away. The last test needs no weights: a
random Whisper never ends a text, which is what it checks (an attempt's length, and one that never ended).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pyarrow.dataset as ds
import pytest
import torch

from helpers import computed_once, int8_copy, tiny_random_models, with_assistant, write_wav
from pipeline.audio import media
from pipeline.cli.status import job_status
from pipeline.decode import DecodeOptions, Transcriber, recover, second_chances
from pipeline.decode import hf_generate as transformers_generate
from pipeline.decode.generate import encode
from pipeline.job.config import JobOptions
from pipeline.job.run import run
from pipeline.models.load import quantized_self_draft

SR = media.SAMPLE_RATE


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def _recall(reference: str, hypothesis: str) -> float:
    heard = set(_words(hypothesis))
    ref = _words(reference)
    return sum(w in heard for w in ref) / len(ref)


@pytest.fixture(scope="module")
def quiet_caller(clips):
    """A loud sentence, 0.3 s, a second voice 20 dB quieter, 2 s of silence: (samples, first, second, second's span)."""
    by_name = {c.path.name: c for c in clips}
    first, second = by_name["2412-153948-0000.flac"], by_name["1089-134691-0000.flac"]
    a, b = media.decode(first.path), media.decode(second.path) * 0.1
    gap = np.zeros(int(0.3 * SR), np.float32)
    x = np.concatenate([a, gap, b, np.zeros(2 * SR, np.float32)]).astype(np.float32)
    start = (len(a) + len(gap)) / SR
    return x, first.text, second.text, (start, start + len(b) / SR)


@pytest.fixture(scope="module")
def noisy_loop(english_human):
    """The first English clips joined (0.5 s apart) up to 28 s, under white noise at -8 dB SNR."""
    parts, texts = [], []
    for clip in sorted(english_human, key=lambda c: c.raw["audio"]):
        samples = media.decode(clip.path)
        if sum(map(len, parts)) + len(samples) > 28 * SR:
            break
        parts += [samples, np.zeros(SR // 2, np.float32)]
        texts.append(clip.text)
    x = np.concatenate(parts)
    power = np.mean(x[np.abs(x) > 1e-4] ** 2)
    noise = np.random.default_rng(0).standard_normal(len(x))
    noise *= np.sqrt(power / 10 ** (-8 / 10) / np.mean(noise**2))
    return (x + noise).astype(np.float32), " ".join(texts)


@pytest.fixture(scope="module")
def tiny_alone(tiny_en_models, noisy_loop, quiet_caller, tmp_path_factory):
    """tiny.en alone with the defaults, the looping piece and the quiet caller in one batch: what the looping test
    reads and the identity test compares the assistant's run with (the loop's ladder of second chances, eight
    decodes of up to 224 tokens, is most of this file's time: run once)."""
    options = DecodeOptions(language="en")
    pieces = [noisy_loop[0], quiet_caller[0]]
    return computed_once(
        tmp_path_factory,
        "tiny-alone",
        lambda folder: Transcriber(tiny_en_models, options, use_assistant=False).transcribe(pieces),
    )


def test_a_quiet_second_voice_dropped_by_greedy_is_recovered_and_recorded(base_models, quiet_caller, tmp_path):
    samples, first, second, (lo, hi) = quiet_caller
    path = write_wav(tmp_path / "caller.wav", samples)
    runs = {}
    for name, coverage in (("greedy", False), ("covered", True)):
        out = tmp_path / name
        options = JobOptions(out_dir=out, progress=False, decode=DecodeOptions(language="en", coverage=coverage))
        assert run([str(path)], options, models=base_models).done == 1
        runs[name] = (
            ds.dataset(out / "segments").to_table().to_pylist(),
            ds.dataset(out / "pieces").to_table().to_pylist(),
        )
    greedy_text = " ".join(s["text"] for s in runs["greedy"][0])
    assert _recall(first, greedy_text) > 0.9 and _recall(second, greedy_text) < 0.4  # the construction still fails
    segments, pieces = runs["covered"]
    text = " ".join(s["text"] for s in segments)
    assert _recall(first, text) > 0.9 and _recall(second, text) > 0.8
    assert any(
        s["start_s"] >= lo - 0.5 and s["end_s"] <= hi + 0.5 and _recall(s["text"], second) > 0.8 for s in segments
    )
    (piece,) = pieces
    (redecode,) = [d for d in piece["redecodes"] if d["tokens"]]
    assert redecode["reason"] == "uncovered speech"
    assert lo - 1.0 <= piece["start_s"] + redecode["start_s"] and piece["start_s"] + redecode["end_s"] <= hi + 1.0
    assert not runs["greedy"][1][0]["redecodes"]
    (row,) = ds.dataset(tmp_path / "covered" / "files").to_table().to_pylist()
    assert row["n_redecodes"] == len(piece["redecodes"]) and row["recovered_tokens"] == len(redecode["tokens"])
    assert (
        f"second chances: {row['n_redecodes']} re-decodes brought {row['recovered_tokens']} tokens"
        in job_status(tmp_path / "covered").render()
    )


def test_a_looping_piece_is_decoded_again_and_keeps_its_words(tiny_en_models, noisy_loop, tiny_alone):
    samples, reference = noisy_loop
    (greedy,) = Transcriber(tiny_en_models, DecodeOptions(fallback_beams=0, coverage=False)).transcribe([samples])
    assert greedy.compression_ratio > 2.4  # the construction still loops
    kept = tiny_alone[0]
    assert kept.compression_ratio <= 2.4
    assert not [d for d in kept.redecodes if not d.reason.startswith("fallback")]  # only the loop's second chances
    attempts = [d for d in kept.redecodes if d.reason.startswith("fallback: compression ratio")]
    assert attempts and attempts[0].reason.startswith(
        f"fallback: compression ratio {greedy.compression_ratio:.2f}; beam 5"
    )
    assert [t for t in kept.tokens if t < tiny_en_models.main.generation_config.eos_token_id] == [
        d for d in attempts if d.tokens
    ][-1].tokens  # the last better attempt is what the piece holds
    greedy_text, kept_text = (" ".join(s.text for s in r.segments) for r in (greedy, kept))
    assert _recall(reference, kept_text) > _recall(reference, greedy_text)  # more of the speech, not less
    assert len(set(_words(kept_text))) > len(set(_words(greedy_text)))


@pytest.mark.identity
def test_second_chances_give_the_same_tokens_with_and_without_an_assistant(
    tiny_en_models, base_models, base_self_int8, quiet_caller, noisy_loop, tiny_alone
):
    """The main model's tokens, second chances, segments and (for base, word timestamps on) words, decoded with
    its self-int8 draft as alone: timings come from the main model."""
    words = DecodeOptions(language="en", word_timestamps=True)
    base_alone = Transcriber(base_models, words, use_assistant=False).transcribe([quiet_caller[0]])
    pairs = [
        (base_self_int8, [quiet_caller[0]], base_alone, words),
        (
            with_assistant(tiny_en_models, quantized_self_draft(tiny_en_models.main), "self-int8"),
            [noisy_loop[0], quiet_caller[0]],
            tiny_alone,
            DecodeOptions(language="en"),
        ),
    ]
    for speculative_models, pieces, plain, options in pairs:
        speculative = Transcriber(speculative_models, dataclasses.replace(options, batch_size=2)).transcribe(pieces)
        assert sum(r.stats.drafted for r in speculative) > 0 and sum(r.stats.drafted for r in plain) == 0
        assert any(r.redecodes for r in plain)
        for p, s in zip(plain, speculative):
            assert p.tokens == s.tokens
            assert [(d.start_s, d.end_s, d.reason, d.tokens) for d in p.redecodes] == [
                (d.start_s, d.end_s, d.reason, d.tokens) for d in s.redecodes
            ]
            assert [(g.start_s, g.end_s, g.text, g.words) for g in p.segments] == [
                (g.start_s, g.end_s, g.text, g.words) for g in s.segments
            ]
            assert not options.word_timestamps or all(g.words for g in p.segments)


def _transformers_attempt(model, features, encoded, beams: int, temperature: float, most: int):
    """One fallback attempt by transformers' own generate, seeded as the ladder seeds it: (token ids, segment
    spans, whether a pass ran to ``most`` tokens without end-of-text)."""
    with torch.random.fork_rng():
        torch.manual_seed(recover.SEED)
        ((ids, segments, _),) = transformers_generate.hf_generate(
            model, features, ["en"], True, None, encoded, num_beams=beams, temperature=temperature, max_new_tokens=most
        )
    eot = model.generation_config.eos_token_id
    rows = {id(g["result"]): g["result"] for g in segments}
    rows = [r.get("sequences") if isinstance(r, dict) else r for r in rows.values()]
    return ids, [(float(g["start"]), float(g["end"])) for g in segments], any(int(r[-1]) != eot for r in rows)


@pytest.mark.identity
def test_the_ladders_beams_and_seeded_samples_are_transformers_tokens_from_one_copy_of_the_keys(
    tiny_en_models, noisy_loop, quiet_caller
):
    """Every rung of the fallback (5 beams, then seeded samples at each temperature), run by podscribe's loop
    (``search.py``), gives transformers' own generate's tokens, segments and ending: in float32 on the quiet
    caller (56 tokens a pass: beams that end), in int8 on the looping piece (224: beams reordered at every step
    that run on, samples over two passes). The beams read one row of cross-attention keys (transformers' held one
    per beam)."""
    endings = set()
    for models, samples, most in (
        (tiny_en_models, quiet_caller[0], 56),
        (int8_copy(tiny_en_models), noisy_loop[0], recover.MAX_NEW_TOKENS),
    ):
        t = Transcriber(models, DecodeOptions(language="en"), use_assistant=False)
        with torch.inference_mode():
            features = t.features([samples])
            encoded = encode(models.main, features)
        held = []
        real_reorder = t.plain.main.reorder

        def reorder(parents, real_reorder=real_reorder, decoder=t.plain.main, held=held):
            held.append((decoder.self_k[0].shape[0], decoder.cross_k[0].shape[0]))
            real_reorder(parents)

        t.plain.main.reorder = reorder
        for label, beams, temperature in recover.fallbacks(5):
            ids, spans, ran_on = _transformers_attempt(
                models.transformers_main(), features, encoded, beams, temperature, most
            )
            ours = second_chances.again(t, features, encoded, "en", beams, temperature, most)
            where = f"{models.runtime.describe()}, {label}"
            assert ours.tokens == ids, where
            assert [(g["start"], g["end"]) for g in ours.segments] == spans, where
            assert ours.ran_on == ran_on, where
            endings.add((beams > 1, ran_on))
        assert len(held) > 50 and set(held) == {(5, 1)}  # five beams' own caches, one row of the piece's keys
    assert {(True, True), (True, False), (False, False)} <= endings, (
        endings
    )  # beams that ran on and ended, samples ended


def test_a_second_chance_is_said_and_the_first_stop_abandons_it(tiny_en_models, noisy_loop, tmp_path, monkeypatch):
    """The looping piece goes to its second chance: a line says so; a stop then (the first Ctrl-C) abandons it at
    once instead of waiting minutes for beams and temperatures, and keeps nothing of it: a resumed run decodes the
    piece again and reaches the same second chance (what a finished ladder keeps: the looping test above)."""
    import threading

    from pipeline.job import Interrupted
    from pipeline.job import run as job_run

    path = write_wav(tmp_path / "loop.wav", noisy_loop[0])
    stop, said = threading.Event(), []

    def second_chance(line: str, shown: bool) -> None:  # the job's own event stops it
        said.append(line)
        stop.set()

    monkeypatch.setattr(job_run, "second_chance", second_chance)
    out = tmp_path / "job"
    options = JobOptions(out_dir=out, progress=False, decode=DecodeOptions(language="en"))
    with pytest.raises(Interrupted):
        run([str(path)], options, models=tiny_en_models, stop=stop)
    assert len(said) == 1 and "second chance" in said[0] and "compression ratio" in said[0], said
    assert not (out / "files").exists(), "the stop waited for the second chance to end"
    first = said.pop()
    stop.clear()
    with pytest.raises(Interrupted):  # resumed: the piece is decoded again, up to its second chance
        run([str(path)], options, models=tiny_en_models, stop=stop)
    assert said == [first], "the resumed run did not decode the piece again to its second chance"


def test_a_stop_during_a_second_chances_search_ends_it_at_the_next_decoder_call(
    tiny_en_models, noisy_loop, tmp_path, monkeypatch
):
    """The Ctrl-C lands while the beams decode (after the ladder began): the decoder's next call abandons the
    attempt (``KVCacheDecoder.on_forward``), not the end of the ladder, and nothing of the piece is kept."""
    import threading

    from pipeline.decode.kv_cache import KVCacheDecoder
    from pipeline.job import Interrupted
    from pipeline.job import run as job_run

    path = write_wav(tmp_path / "loop.wav", noisy_loop[0])
    stop, calls_after_stop = threading.Event(), []
    monkeypatch.setattr(job_run, "second_chance", lambda line, shown: None)
    real_for_rung, real_forward = second_chances.search.for_rung, KVCacheDecoder.forward

    def for_rung(*args, **kwargs):
        search = real_for_rung(*args, **kwargs)

        def stopped_during(*a, **k):
            stop.set()  # the search has begun; its first decoder call is next
            return search(*a, **k)

        return stopped_during if search is not None else None

    def forward(self, *args, **kwargs):
        out = real_forward(self, *args, **kwargs)
        if stop.is_set():
            calls_after_stop.append(1)
        return out

    monkeypatch.setattr(second_chances.search, "for_rung", for_rung)
    monkeypatch.setattr(KVCacheDecoder, "forward", forward)
    out = tmp_path / "job"
    options = JobOptions(out_dir=out, progress=False, decode=DecodeOptions(language="en"))
    with pytest.raises(Interrupted):
        run([str(path)], options, models=tiny_en_models, stop=stop)
    assert calls_after_stop == [], "a decoder call ran after the stop"
    assert not (out / "files").exists(), "the stop waited for the second chance to end"


def test_a_short_pieces_attempts_stop_at_their_length_and_one_that_never_ended_is_not_kept(
    base_vocabulary, monkeypatch
):
    """A random Whisper (real mechanics) on 2 s of noise fails Whisper's checks and walks the whole ladder; every
    attempt is given ``recover.rung_tokens(2.0)`` tokens, not openai-whisper's 224, and runs on to them. An attempt
    that never ended is a loop whatever its numbers: the beam's higher log-probability and low compression ratio
    would otherwise have replaced the greedy text. (The loop stop of decision 0060 would have ended the greedy
    babble as a loop, and then the beam's higher log-probability replaces it: off here, to judge the rungs alone.)"""
    from pipeline.decode import transcriber
    from pipeline.decode.generate import Generator

    monkeypatch.setattr(transcriber, "LOOP_STOP", float("inf"))

    models = tiny_random_models(base_vocabulary, 7)  # a seed whose beam scores above its greedy text
    samples = (np.random.default_rng(0).standard_normal(2 * SR) * 0.1).astype(np.float32)
    asked, judged = [], []
    real_generate, real_better = Generator.generate, recover.better

    def generate(self, *args, **kwargs):
        if kwargs.get("search") is not None or kwargs.get("max_new_tokens") is not None:  # an attempt
            asked.append(kwargs["max_new_tokens"])
        return real_generate(self, *args, **kwargs)

    def better(first, second, *thresholds):
        judged.append((first, second, real_better(first, second, *thresholds)))
        return judged[-1][-1]

    monkeypatch.setattr(Generator, "generate", generate)
    monkeypatch.setattr(recover, "better", better)
    options = DecodeOptions(language="en", coverage=False, vad=False)
    (r,) = Transcriber(models, options).transcribe([samples])
    rungs = recover.fallbacks(options.fallback_beams)
    assert len(asked) == len(judged) == len(rungs)  # the whole ladder
    assert asked == [recover.rung_tokens(2.0)] * len(rungs)
    assert all(second.ran_on for _, second, _ in judged)  # the construction: a random model never ends
    assert not any(kept for _, _, kept in judged)
    assert any(  # and the flag decided it: by its numbers the attempt would have replaced the greedy text
        real_better(first, dataclasses.replace(second, ran_on=False), options.logprob_threshold, 2.4)
        for first, second, _ in judged
    )
    assert [d.reason.split("; ")[-1] for d in r.redecodes] == [f"{label}: not better" for label, _, _ in rungs]


def test_a_job_whose_piece_walks_the_ladder_never_imports_transformers(noisy_loop, cache_dir, tmp_path):
    """In a real process (`python -X importtime`, which lists every module imported): the looping piece fails
    Whisper's checks and is decoded again, beams and seeded samples, and no module of transformers is imported
    (its import was ~2.3 s of the first second chance in every process, its generate ~3x podscribe's loop a step)."""
    import subprocess
    import sys

    from helpers import REPO

    wav = write_wav(tmp_path / "loop.wav", noisy_loop[0])
    env = {"PODSCRIBE_CACHE": str(cache_dir), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "podscribe", "transcribe", str(wav), "--out", str(tmp_path / "j")]
        + ["--model", "tiny.en", "--compute-type", "float32", "--language", "en", "-q"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    (piece,) = ds.dataset(tmp_path / "j" / "pieces").to_table().to_pylist()
    assert any(d["reason"].startswith("fallback: compression ratio") for d in piece["redecodes"])  # the ladder ran
    imported = set(re.findall(r"^import time:.*\|\s*([\w.]+)$", run.stderr, re.M))
    assert {"pipeline.decode.search", "torch"} <= imported  # the log is complete
    assert not {m for m in imported if m.split(".")[0] == "transformers"}
