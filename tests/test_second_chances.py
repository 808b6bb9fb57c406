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
from contextlib import nullcontext

import numpy as np
import pyarrow.dataset as ds
import pytest
import torch

from helpers import computed_once, int8_copy, tiny_random_models, with_assistant, write_wav
from pipeline.audio import media
from pipeline.cli.status import job_status
from pipeline.decode import DecodeOptions, Transcriber
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


# The beam tests' search length: enough steps that the beams are reordered many times (the fallback's own runs to
# recover.MAX_NEW_TOKENS on this piece, four times as long and no different per step).
SEARCH_STEPS = 56


def test_the_beams_of_a_piece_share_one_copy_of_its_cross_attention_cache(tiny_en_models, noisy_loop, monkeypatch):
    """The fallback's beam search (one piece, 5 beams) projects and keeps one row of cross-attention keys and
    values for all its beams — transformers' own does it per beam and copies them all at every step — and gives
    transformers' own tokens: in int8, where a row's projection is the same bits at any height by construction,
    and in float32."""
    samples = noisy_loop[0]  # 28 s of speech under noise: the piece the fallback of tiny.en runs on
    stored: list[int] = []  # rows of cross-attention keys held, per decoder call
    projected: list[int] = []  # rows of encoder states projected to cross-attention keys

    def rows_stored(module, args, kwargs, output):
        keys = kwargs.get("cache", kwargs.get("past_key_values")).cross_attention_cache.layers[0].keys
        stored.append(keys.untyped_storage().nbytes() // (keys[0].numel() * keys.element_size()))

    for models in (tiny_en_models, int8_copy(tiny_en_models)):
        model = models.transformers_main()  # the model transformers' beam search runs
        with torch.inference_mode():
            features = Transcriber(models).features([samples])
            encoded = encode(model, features)
        handles = [
            model.get_decoder().register_forward_hook(rows_stored, with_kwargs=True),
            model.get_decoder()
            .layers[0]
            .encoder_attn.k_proj.register_forward_hook(lambda module, args, output: projected.append(args[0].shape[0])),
        ]
        try:
            runs = {}
            for name in ("shared", "transformers'"):
                stored.clear(), projected.clear()
                (runs[name],) = transformers_generate.hf_generate(
                    model, features, ["en"], True, None, encoded, num_beams=5, max_new_tokens=SEARCH_STEPS
                )
                runs[name + " rows"] = set(stored), projected[:]
                monkeypatch.setattr(transformers_generate, "beams_share_one_source", lambda model: nullcontext())
            monkeypatch.undo()
        finally:
            for handle in handles:
                handle.remove()
        assert runs["shared rows"][0] == {1} and runs["transformers' rows"][0] == {5}  # held
        assert set(runs["shared rows"][1]) == {1} and set(runs["transformers' rows"][1]) == {5}  # projected
        assert len(runs["shared"][0]) > 50  # a search of many steps, each reordering the beams
        assert runs["shared"][0] == runs["transformers'"][0], models.runtime.describe()
        spans = {k: [(float(g["start"]), float(g["end"])) for g in runs[k][1]] for k in ("shared", "transformers'")}
        assert spans["shared"] == spans["transformers'"]


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


def test_a_short_pieces_attempts_stop_at_their_length_and_one_that_never_ended_is_not_kept(
    base_vocabulary, monkeypatch
):
    """A random Whisper (real mechanics, transformers' own generate) on 2 s of noise fails Whisper's checks and
    walks the whole ladder; every attempt is given ``recover.rung_tokens(2.0)`` tokens, not openai-whisper's 224,
    and runs on to them. An attempt that never ended is a loop whatever its numbers: the beam's higher
    log-probability and low compression ratio would otherwise have replaced the greedy text."""
    from pipeline.decode import hf_generate as hf
    from pipeline.decode import recover

    models = tiny_random_models(base_vocabulary, 7)  # a seed whose beam scores above its greedy text
    samples = (np.random.default_rng(0).standard_normal(2 * SR) * 0.1).astype(np.float32)
    asked, judged = [], []
    real_generate, real_better = hf.hf_generate, recover.better

    def generate(*args):
        asked.append(args[-1])  # max_new_tokens, the last positional argument
        return real_generate(*args)

    def better(first, second, *thresholds):
        judged.append((first, second, real_better(first, second, *thresholds)))
        return judged[-1][-1]

    monkeypatch.setattr(hf, "hf_generate", generate)
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
