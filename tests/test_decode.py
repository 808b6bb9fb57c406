"""Decode stage: one projection of the cross-attention for every pass, the scoring pass in chunks, language
detection, silence, drafts loaded from checkpoints. The assistant path's token identity through the stage (and
the loop's): test_identity.py's matrix; with second chances and word timings: test_second_chances.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers import close, int8_copy, tiny_random_models, with_assistant
from pipeline.audio import media
from pipeline.decode import DecodeOptions, Transcriber
from pipeline.decode.segments import is_non_speech_text


@pytest.fixture(scope="module")
def speech_pieces(clips) -> list[np.ndarray]:
    names = ["jfk.flac", "LJ001-0001.wav", "1089-134686-0000.flac", "test.wav"]
    by_name = {c.path.name: c for c in clips}
    return [media.decode(by_name[n].path) for n in names]


@pytest.fixture(scope="module")
def cut_in_speech(speech_pieces) -> list[np.ndarray]:
    """Two pieces cut in the middle of speech (26 s, 28 s): decoded again from their last timestamp (a later
    pass over its own window, its rules started afresh)."""
    joined = np.concatenate([speech_pieces[2], speech_pieces[0], speech_pieces[1]])
    return [joined[: 26 * media.SAMPLE_RATE], joined[: 28 * media.SAMPLE_RATE]]


# Random weights fail every check of Whisper's: the fallback would decode each piece six more times. These
# tests are about the first pass; second chances with and without an assistant: tests/test_second_chances.py.
FIRST_PASS = {"fallback_beams": 0, "coverage": False}


def _tokens(models, pieces, **opts):
    results = Transcriber(models, DecodeOptions(language="en", **opts)).transcribe(pieces)
    return [r.tokens for r in results], results


def _projecting(models, pieces) -> tuple[list, int, list, list]:
    """Each piece's (tokens, avg log-prob, no-speech probability), the rows of encoder states projected to
    cross-attention keys (layer 0), each piece's passes, and the runs the decoding loop read the cross-attention
    rows in."""
    from pipeline.decode import kv_cache

    projected, runs, real_runs = [], [], kv_cache._runs
    hook = (
        models.main.get_decoder()
        .layers[0]
        .encoder_attn.k_proj.register_forward_hook(lambda module, args, output: projected.append(args[0].shape[0]))
    )
    kv_cache._runs = lambda rows: runs.append(real_runs(rows)) or runs[-1]
    try:
        options = DecodeOptions(language="en", batch_size=4, **FIRST_PASS)
        results = Transcriber(models, options).transcribe(pieces)
    finally:
        hook.remove()
        kv_cache._runs = real_runs
    passes = [r.stats.passes for r in results]
    return [(r.tokens, r.avg_logprob, r.no_speech_prob) for r in results], sum(projected), passes, runs


def tokens_of(scored: list[tuple]) -> list:
    return [tokens for tokens, *_ in scored]


@pytest.mark.identity
def test_a_batch_projects_its_cross_attention_once_for_every_pass_over_it(
    tiny_en_models, speech_pieces, cut_in_speech, monkeypatch
):
    """The no-speech probe, the decoding loop and the scoring pass read one projection of the batch's
    cross-attention keys/values (each projected its own: three times the rows); a later pass writes its
    window's into its rows and the first window's are projected back for scoring. The same bits either way —
    tokens, average log-probability, no-speech probability — also after a row in the middle of the batch has
    finished and the rows left read the shared rows in separate runs (their own rows: int8's batch equals
    each piece decoded alone)."""

    from pipeline.decode import forced, kv_cache, transcriber

    # later passes as transformers' rule runs them: the stage's own (decision 0055) leaves one only after a pass cut
    # at its token cap, through the same code
    monkeypatch.setattr(transcriber, "OPEN_END_S", None)
    # a short piece among long ones finishes first (the rows left are 0, 2, 3 of the shared rows); the pieces
    # cut in speech take later passes
    pieces = [speech_pieces[0], speech_pieces[1][: 3 * media.SAMPLE_RATE], *cut_in_speech]
    start = kv_cache.KVCacheDecoder.start
    n = len(pieces)
    int8 = int8_copy(tiny_en_models)
    for models in (tiny_en_models, int8):
        shared, shared_rows, passes, runs = _projecting(models, pieces)
        with monkeypatch.context() as m:  # each pass projects its own, as before: transformers' forward, the loop
            m.setattr(forced, "read_cross", lambda model, cross: None)
            m.setattr(kv_cache.KVCacheDecoder, "start", lambda self, e, c, *cross: start(self, e, c))
            m.setattr(kv_cache.CrossKV, "project_into", lambda self, model, e, rows: None)
            own, own_rows, own_passes, _ = _projecting(models, pieces)
        # the same tokens; the scores within float32 rounding (see below)
        assert tokens_of(shared) == tokens_of(own) and close(shared, own), models.runtime.describe()
        assert all(len(tokens) > 5 for tokens, _, _ in shared)
        later = sum(p - 1 for p in passes)
        assert later > 0 and passes == own_passes
        assert shared_rows == n + 2 * later  # the batch, each later window and its restored first window
        # the scoring pass projects its own for the rows it scores: in int8 the loop scores a piece of one pass
        # (score.py), in float32 the pass scores every piece
        by_the_pass = n if models is tiny_en_models else sum(p > 1 for p in passes)
        # the batch's projection (unread), the probe's and the loop's own, the scoring pass's, each later window
        assert own_rows == n + 2 * n + by_the_pass + later
        assert any(r is not None and len(r) > 1 for r in runs), "no row left the batch from its middle"
    # the rows left read their own shared rows: each piece's tokens are those it gets alone. Only the linear
    # layers are exact at any batch height (int8: integer sums); attention, norms and the log-softmax stay float32,
    # whose kernels block by the tensor's shape and the CPU's instruction set. With AVX2 kernels a short piece
    # scored in a padded batch differs in the last bit, and int8 re-quantizes every layer's input, so such a bit
    # can move an activation by a whole step: its average log-prob moved 0.0093 (tokens equal). Scores are
    # compared within 0.02, tokens exactly.
    batch = shared  # int8's, the loop's last
    alone = [_projecting(int8, [piece])[0][0] for piece in pieces]
    assert tokens_of(batch) == tokens_of(alone) and close(batch, alone, rel=0, abs_=0.02)


@pytest.mark.identity
def test_the_scoring_pass_scores_a_row_in_chunks_as_the_whole_row(
    tiny_en_models, speech_pieces, cut_in_speech, monkeypatch
):
    """The average log-probability (the fallback's threshold, the manifest's column) is scored a few positions
    at a time so that an hour's long rows do not set its peak memory: with chunk borders inside every row and
    inside each later pass (whose rules start afresh) the scores are the whole row's, to the bit. In int8 (the
    CPU's default): its output projection is row-exact, so any difference is the chunking's. The chunks' code
    does not depend on the dtype; float32 would compare within its matrix product's blocking."""
    from pipeline.decode import score, transcriber

    monkeypatch.setattr(transcriber, "OPEN_END_S", None)  # later passes as transformers' rule runs them (above)
    pieces = [speech_pieces[0], *cut_in_speech]
    models = int8_copy(tiny_en_models)
    scored = {}
    for chunk in (7, 10_000):
        monkeypatch.setattr(score, "SCORE_CHUNK", chunk)
        results = Transcriber(models, DecodeOptions(language="en", batch_size=4, **FIRST_PASS)).transcribe(pieces)
        scored[chunk] = [(r.tokens, r.avg_logprob) for r in results]
    assert all(len(tokens) > 3 * 7 for tokens, _ in scored[7]), [len(t) for t, _ in scored[7]]
    assert any(r.stats.passes > 1 for r in results), "no later pass: its rules' restart went unscored"
    assert scored[7] == scored[10_000]


def test_a_token_the_rules_forbid_keeps_its_raw_score(tiny_en_models, speech_pieces):
    """The rules mask logits in place; a token they forbid where the teacher-forced row differs from the decoding
    (text right after the prompt, where a timestamp must come first) is scored by its raw log-probability, never
    -inf: an -inf average sends every such piece through the whole fallback ladder (a reordering of the two
    log-softmaxes did that on real audio)."""
    import math

    import torch

    from pipeline.decode import score
    from pipeline.decode.generate import Generated
    from pipeline.facts.records import PieceResult

    models = tiny_en_models
    t = Transcriber(models, DecodeOptions(language="en"))
    encoded = t._encode([speech_pieces[0]])
    text = models.tokenizer.encode(" hello there", add_special_tokens=False)
    ts = t.plain.rules.ts_begin
    for tokens in (text + [ts + 50], [ts, *text, ts + 50]):  # the first: its first token is forbidden
        result = PieceResult()
        g = Generated(tokens=tokens, segments=[], pass_lengths=[len(tokens)])
        with torch.inference_mode():
            score.avg_logprobs(models.main, t.plain.rules, t.tokens.eot, encoded, [t.prompt("en")], [g], [result])
        assert math.isfinite(result.avg_logprob) and result.avg_logprob < 0, (tokens, result.avg_logprob)


def test_language_is_detected_when_not_given(base_models, clips):
    by_lang = {c.language: c for c in clips if c.path.parent.name == "picovoice_leopard"}
    pieces = [media.decode(by_lang[lang].path) for lang in ("en", "de", "fr")]
    results = Transcriber(base_models, DecodeOptions(language=None)).transcribe(pieces)
    assert [r.language for r in results] == ["en", "de", "fr"]


def test_english_only_model_refuses_other_languages(tiny_en_models):
    with pytest.raises(ValueError, match="English-only"):
        Transcriber(tiny_en_models, DecodeOptions(language="de"))


@pytest.mark.parametrize(
    "text,expected",
    [
        ("♪ ♪", True),
        ("[Music]", True),
        ("(upbeat music)", True),
        ("...", True),
        ("Thank you.", False),
        ("[Music] and then", False),
    ],
)
def test_non_speech_texts(text, expected):
    assert is_non_speech_text(text) is expected


def test_silence_is_not_decoded(tiny_en_models):
    results = Transcriber(tiny_en_models).transcribe([np.zeros(16000 * 20, np.float32)])
    assert results[0].skipped == "silence" and results[0].segments == [] and results[0].stats.main_calls == 0


def test_assistant_checkpoints_load_decoder_only_or_seq2seq(base_vocabulary, speech_pieces, tmp_path, cache_dir):
    """A Distil-Whisper-like checkpoint (same encoder shape) drafts with the main encoder; another shape keeps
    its own encoder. Both leave the main model's tokens as they are."""
    from transformers import WhisperForCausalLM, WhisperForConditionalGeneration

    from pipeline.models.load import load_assistant

    main = tiny_random_models(base_vocabulary, 5)
    alone, _ = _tokens(main, speech_pieces[:1], **FIRST_PASS)
    for name, kind, seed, d_model in [
        ("same", WhisperForCausalLM, 6, 64),
        ("other", WhisperForConditionalGeneration, 7, 32),
    ]:
        draft_models = tiny_random_models(base_vocabulary, seed, d_model=d_model)
        draft_models.main.save_pretrained(tmp_path / name)
        draft_models.processor.save_pretrained(tmp_path / name)
        draft = load_assistant(str(tmp_path / name), main.main, main.processor, main.runtime, cache_dir)
        assert type(draft) is kind
        assisted, results = _tokens(with_assistant(main, draft, name), speech_pieces[:1], **FIRST_PASS)
        assert assisted == alone and results[0].stats.draft_calls > 0


def test_audio_left_after_a_seek():
    """A later pass reads audio, never the window's padding alone: 22.00 s in a 21.65 s piece has nothing left,
    21.64 s has, counted in whole mel frames as openai-whisper does; without the row's length, transformers' rule
    (the 3000 frames) is all there is."""
    from pipeline.decode.generate import audio_left

    piece = [int(21.65 * media.SAMPLE_RATE)]
    assert not audio_left(2200, 3000, piece, 0) and not audio_left(2165, 3000, piece, 0)
    assert audio_left(2164, 3000, piece, 0) and audio_left(2200, 3000, None, 0)
    ragged = [piece[0] + 80]  # half a mel frame more: openai-whisper's content_frames (n // 160) is still 2165
    assert not audio_left(2165, 3000, ragged, 0) and audio_left(2164, 3000, ragged, 0)
    assert not audio_left(3000, 3000, None, 0) and not audio_left(3000, 3000, [10**7], 0)


def test_a_later_pass_starts_only_where_the_piece_has_audio_left(base_vocabulary, speech_pieces, monkeypatch):
    """Planted first passes through the real generator (a random Whisper's encoder and caches; the loop's tokens
    planted): a 2.5 s piece whose last segment closes at 3.00 s (the next one opened) takes no pass over padding
    alone, a 5 s one closing at 1.20 s goes on from there; without the rows' lengths both go on (transformers'
    short-form rule).
    The pass it keeps is the same either way, and the rule is the same with a draft (a seq2seq one here) and for a
    second chance's search (beams, samples: one piece at a time). The first passes are planted as cut at their
    token cap: in the stage, a pass that ended is the piece's whole decode (decision 0055, the next test)."""
    from pipeline.decode import generate, second_chances
    from pipeline.decode.speculative import Decoded
    from pipeline.facts.records import DecodeStats

    main = tiny_random_models(base_vocabulary, 5)
    draft = tiny_random_models(base_vocabulary, 7, d_model=32).main
    pieces = [speech_pieces[0][: int(2.5 * media.SAMPLE_RATE)], speech_pieces[0][: 5 * media.SAMPLE_RATE]]
    ts, text = generate.Generator(main).rules.ts_begin, 400

    def planted(_main, prompts, *_args, **_kw) -> Decoded:
        rows = prompts.shape[0]
        calls.append(rows)
        if len(calls) == 1:  # the first pass: a segment to 3.00 / 1.20 s and the next one opened (seek goes there)
            tokens = [[ts, text, ts + 150, ts + 160], [ts, text, ts + 60, ts + 70]]
        else:  # a later pass ends on a single timestamp: the row is done
            tokens = [[ts, text, ts + 10]] * rows
        # the first pass cut at its token cap: one that ended would be the piece's in the stage (decision 0055)
        return Decoded(tokens, [len(calls) > 1] * rows, [DecodeStats() for _ in range(rows)])

    monkeypatch.setattr(generate, "greedy", planted)
    features = Transcriber(main, DecodeOptions(language="en")).features(pieces)
    lengths = [len(p) for p in pieces]
    for models in (main, with_assistant(main, draft, "other")):
        g = generate.Generator(models)
        prompts = [g.prompt("en")] * 2
        calls = []
        told = g.generate(features, prompts, samples=lengths)
        assert calls == [2, 1] and [r.stats.passes for r in told] == [1, 2]
        assert told[0].segments[-1]["end"] == pytest.approx(3.0) and told[1].segments[-1]["start"] == pytest.approx(1.2)
        calls = []
        untold = g.generate(features, prompts)
        assert calls == [2, 2] and [r.stats.passes for r in untold] == [2, 2]
        assert (
            untold[0].segments[: len(told[0].segments)] == told[0].segments and untold[1].segments == told[1].segments
        )
    calls = []  # the stage tells the generator its pieces' lengths
    results = Transcriber(main, DecodeOptions(language="en", **FIRST_PASS)).transcribe(pieces)
    assert calls == [2, 1] and [r.stats.passes for r in results] == [1, 2]

    def one_piece(piece: int):  # a second chance's search, planted: the same first pass, one piece at a time
        def search(_main, prompts, *_args) -> Decoded:
            calls.append(prompts.shape[0])
            first = [[ts, text, ts + 150, ts + 160], [ts, text, ts + 60, ts + 70]][piece]
            return Decoded([first if len(calls) == 1 else [ts, text, ts + 10]], [len(calls) > 1], [DecodeStats()])

        return search

    stage = Transcriber(main, DecodeOptions(language="en"), use_assistant=False)
    for piece, passes in ((0, 1), (1, 2)):
        calls = []
        monkeypatch.setattr(second_chances.search, "for_rung", lambda *_args, piece=piece: one_piece(piece))
        retry = second_chances.again(stage, features[piece : piece + 1], None, "en", 5, 0.0, 224, lengths[piece])
        assert calls == [1] * passes and retry.stats.passes == passes


def test_a_pass_of_the_stage_keeps_the_rest_of_its_window(base_vocabulary, speech_pieces, monkeypatch):
    """Decision 0055 through the real generator (a random Whisper's encoder and caches; the loop's tokens planted).
    Each pass is told its rows' ``end_from``: the timestamp from which less than 1 s of the row's voice (as the VAD
    heard it; else of its audio) is left (0 where less than that is left at all, and for transformers' rule). A first pass that ends on text inside a
    segment it opened after another keeps that text, to the piece's end: one pass, where transformers' rule (a
    generator without ``open_end_s``, or not told the lengths) drops it and decodes again from the last closing
    timestamp; one that ends after an opening timestamp with less than 1 s left is the piece's too. A pass cut at
    its token cap goes on as before; and the scoring reads each pass's ``end_from``."""
    from pipeline.decode import generate
    from pipeline.decode.speculative import Decoded
    from pipeline.facts.records import DecodeStats
    from pipeline.facts.whisper import OPEN_END_S

    main = tiny_random_models(base_vocabulary, 5)
    pieces = [speech_pieces[0][: int(2.5 * media.SAMPLE_RATE)], speech_pieces[0][: 5 * media.SAMPLE_RATE]]
    lengths = [len(p) for p in pieces]
    ts, text = generate.Generator(main).rules.ts_begin, 400
    first = [[ts, text, ts + 60, ts + 70, text + 1, text + 2], [ts, text, ts + 60, ts + 70, text + 3]]

    def planted(
        _main, prompts, _rules, _limit, _draft=None, _policy=None, end_from=None, scored=False, _looping=None
    ) -> Decoded:
        rows = prompts.shape[0]
        calls.append(end_from)
        tokens = first if len(calls) == 1 else [[ts, text, ts + 10]] * rows
        return Decoded(tokens, [finished] * rows if len(calls) == 1 else [True] * rows, [DecodeStats()] * rows)

    monkeypatch.setattr(generate, "greedy", planted)
    features = Transcriber(main, DecodeOptions(language="en")).features(pieces)
    stage = generate.Generator(main, open_end_s=OPEN_END_S)
    prompts = [stage.prompt("en")] * 2
    calls, finished = [], True
    kept = stage.generate(features, prompts, samples=lengths)
    assert calls == [[ts + 76, ts + 201]] and [g.stats.passes for g in kept] == [
        1,
        1,
    ]  # 1 s or more left up to 1.50 s / 4.00 s
    assert [g.segments[-1]["tokens"] for g in kept] == [[text + 1, text + 2], [text + 3]]
    assert [g.segments[-1]["start"] for g in kept] == pytest.approx([1.4, 1.4])
    assert [g.segments[-1]["end"] for g in kept] == pytest.approx([2.5, 5.0])
    assert [g.tokens for g in kept] == first and [g.pass_ends for g in kept] == [[ts + 76], [ts + 201]]
    calls, first = [], [[ts, text, ts + 100, ts + 110], [ts, text, ts + 210, ts + 220]]
    ended = stage.generate(features, prompts, samples=lengths)  # after <|2.20|> / <|4.40|>: under 1 s left
    assert len(calls) == 1 and [g.stats.passes for g in ended] == [1, 1] and [g.tokens for g in ended] == first
    assert [g.segments[-1]["end"] for g in ended] == pytest.approx([2.0, 4.2])
    calls, first = [], [[ts, text, ts + 60, ts + 70, text + 1, text + 2], [ts, text, ts + 60, ts + 70, text + 3]]
    # with the VAD's voice, what is left is voice: 0.5 s in all (no rule), 1 s left from 3.50 s
    stage.generate(features, prompts, samples=lengths, voices=[[(0.0, 0.5)], [(0.0, 1.0), (2.0, 4.5)]])
    assert calls == [[0, ts + 176]]
    for told, generator in ((False, stage), (True, generate.Generator(main))):
        calls = []
        again = generator.generate(features, prompts, samples=lengths if told else None)
        assert calls == [[0, 0], [0, 0]] and [g.stats.passes for g in again] == [2, 2]
        assert [g.segments[1]["start"] for g in again] == pytest.approx([1.2, 1.2])  # from <|1.20|> again
    calls, finished = [], False  # cut at the cap: decoded again from <|1.20|> (1.30 s left, 3.80 s)
    capped = stage.generate(features, prompts, samples=lengths)
    assert calls == [[ts + 76, ts + 201], [ts + 16, ts + 141]] and [g.stats.passes for g in capped] == [2, 2]
    from pipeline.decode.score import rule_states

    states = rule_states(stage.rules, capped[1], len(capped[1].tokens) + 1, "cpu")
    assert states.end_from[0].tolist() == [ts + 201] * 4 + [ts + 141] * 4  # each pass's, restarted with it


@pytest.mark.identity
def test_a_pass_keeps_the_rest_of_its_window_with_and_without_a_draft(base_models, base_self_int8, cut_in_speech):
    """Decision 0055 on real weights and real speech cut mid-sentence (the pieces transformers' rule decodes again
    from their last timestamp): the stage's rule gives the same token ids and segments with a draft (base's int8
    self-draft, whose proposals the rule's states are stepped through) as without, and it does move something
    against transformers' rule (fewer passes or other tokens), so the comparison is not vacuous."""
    from pipeline.decode import generate
    from pipeline.facts.whisper import OPEN_END_S, PASS_TOKENS

    stage = Transcriber(base_models, DecodeOptions(language="en"))
    features = stage.features(cut_in_speech)
    voices = [stage.voice(p).spans for p in cut_in_speech]
    samples, prompts = [len(p) for p in cut_in_speech], [stage.prompt("en")] * len(cut_in_speech)
    runs = {}
    for name, models, rule in (
        ("plain", base_models, OPEN_END_S),
        ("draft", base_self_int8, OPEN_END_S),
        ("transformers' rule", base_models, None),
    ):
        g = generate.Generator(models, open_end_s=rule, pass_tokens=PASS_TOKENS)
        runs[name] = g.generate(features, prompts, samples=samples, voices=voices)
    plain, draft, theirs = runs["plain"], runs["draft"], runs["transformers' rule"]
    assert sum(g.stats.drafted for g in draft) > 0
    assert [g.tokens for g in plain] == [g.tokens for g in draft]
    assert [g.segments for g in plain] == [g.segments for g in draft]
    assert all(g.stats.passes == 1 for g in plain) and any(g.stats.passes > 1 for g in theirs)
    assert all(g.scores is None for g in plain)  # float32: the scoring pass (below)


@pytest.mark.identity
def test_the_loops_scores_are_the_scoring_passes(base_models, cut_in_speech, speech_pieces):
    """int8 on the CPU (the default): the decoding loop's log-probabilities stand in for the teacher-forced
    scoring pass where it scored a whole row (a greedy pass that ended), the same bits with a draft as without
    (base's int8 self-draft). They are the pass's scores for the same tokens: in float32, where the two differ
    only in the attention's summation order, to 1e-4 (the loop made to score there: its verify is not row-exact,
    so a job does not); in int8 within 0.03, where that order now and then moves an activation's rounding step
    (0.002-0.012 on these rows; the loop's are the scores that chose the tokens, as in openai-whisper). A row
    the loop cannot score (a later pass reads it as context) gets the pass, alone where others need none."""
    from dataclasses import replace

    import torch

    from pipeline.decode import generate, score
    from pipeline.facts.records import PieceResult
    from pipeline.facts.whisper import OPEN_END_S, PASS_TOKENS
    from pipeline.models.load import quantized_self_draft

    int8 = int8_copy(base_models)
    drafted = with_assistant(int8, quantized_self_draft(base_models.main), "self-int8")
    pieces = [speech_pieces[0], speech_pieces[1], *cut_in_speech]
    stage = Transcriber(int8, DecodeOptions(language="en"))
    features = stage.features(pieces)
    samples, prompts = [len(p) for p in pieces], [stage.prompt("en")] * len(pieces)
    plain = generate.Generator(int8, open_end_s=OPEN_END_S, pass_tokens=PASS_TOKENS)
    draft = generate.Generator(drafted, open_end_s=OPEN_END_S, pass_tokens=PASS_TOKENS)
    assert plain.main.row_exact and not draft.draft.row_exact  # the draft: fused products, it only proposes
    rows, with_draft = (g.generate(features, prompts, samples=samples) for g in (plain, draft))
    assert sum(g.stats.drafted for g in with_draft) > 0
    assert [g.tokens for g in rows] == [g.tokens for g in with_draft]
    assert all(g.scores is not None for g in rows) and [g.scores for g in rows] == [g.scores for g in with_draft]

    for models, tolerance in ((base_models, 1e-4), (int8, 0.03)):
        encoded = Transcriber(models, DecodeOptions(language="en"))._encode(pieces)
        for rule in (OPEN_END_S, None):
            gen = generate.Generator(models, open_end_s=rule, pass_tokens=PASS_TOKENS)
            assert gen.main.row_exact == (models is int8)
            gen.main.row_exact = True  # float32's loop scores too, for the comparison
            rows = gen.generate(features, prompts, encoded, samples=samples)
            loop, forced = [PieceResult() for _ in rows], [PieceResult() for _ in rows]
            with torch.inference_mode():
                score.avg_logprobs(models.main, gen.rules, stage.tokens.eot, encoded, prompts, rows, loop)
                unscored = [replace(g, scores=None) for g in rows]
                score.avg_logprobs(models.main, gen.rules, stage.tokens.eot, encoded, prompts, unscored, forced)
            scored = [g.scores is not None for g in rows]
            # decision 0055's rule: every pass ends and is the piece's; transformers' decodes the cut pieces again
            assert all(scored) if rule is not None else (any(scored) and not all(scored))
            for g, a, b in zip(rows, loop, forced):
                assert a.avg_logprob == pytest.approx(b.avg_logprob, abs=tolerance), g.tokens


def test_a_pass_of_the_stage_stops_at_openai_whispers_sample_length(base_vocabulary, monkeypatch):
    """A random Whisper never ends a text (real mechanics): each pass of the stage's generators stops after 224
    tokens, openai-whisper's sample_len (decision 0052), with or without a draft; a generator without
    ``pass_tokens`` runs a pass on to Whisper's 448 positions, as transformers' generate does. The tokens up to
    the cap are the same: only what a pass decodes past it moves. (The stage's loop stop, decision 0060, would end
    the babble at its first looping check: off here.)"""
    from pipeline.decode import generate, transcriber
    from pipeline.facts.whisper import PASS_TOKENS

    monkeypatch.setattr(transcriber, "LOOP_STOP", float("inf"))

    models = tiny_random_models(base_vocabulary, 5)
    samples = (np.random.default_rng(0).standard_normal(2 * media.SAMPLE_RATE) * 0.1).astype(np.float32)
    passes, real_greedy = [], generate.greedy

    def greedy(main, prompts, rules, max_length, *args, **kwargs):
        decoded = real_greedy(main, prompts, rules, max_length, *args, **kwargs)
        passes.append((max_length - prompts.shape[1], [len(row) for row in decoded.tokens], decoded.tokens[0]))
        return decoded

    monkeypatch.setattr(generate, "greedy", greedy)
    stage = Transcriber(models, DecodeOptions(language="en", **FIRST_PASS))
    features = stage.features([samples])
    prompt = stage.prompt("en")
    runs = {}
    for name, generator in (
        ("stage", stage.plain),
        ("stage, a draft", generate.Generator(with_assistant(models, models.main, "copy"), pass_tokens=PASS_TOKENS)),
        ("uncapped", generate.Generator(models, use_assistant=False)),
    ):
        passes.clear()
        generator.generate(features, [prompt])
        runs[name] = passes[:]
    for name in ("stage", "stage, a draft"):
        assert {room for room, _, _ in runs[name]} == {PASS_TOKENS}
        assert max(n for _, lengths, _ in runs[name] for n in lengths) == PASS_TOKENS  # the construction: runs on
    (room, lengths, first), *_ = runs["uncapped"]
    assert room == 448 - len(prompt) and lengths[0] > PASS_TOKENS
    assert runs["stage"][0][2] == runs["stage, a draft"][0][2] == first[:PASS_TOKENS]


def test_the_default_batch_follows_how_much_a_rows_cross_attention_keys_take(base_vocabulary):
    """Without --batch-size the stage decodes 16 rows where 16 rows' keys and values fit the budget, else 8
    (decision 0059): base (6 decoder layers, 512 wide, float32) and distil-large (2 layers, 1,280) get 16, small
    (12, 768) and large in float16 (32, 1,280) 8. ``bytes_a_row`` is what ``CrossKV.project`` holds for a row."""
    from pipeline.decode.kv_cache import CrossKV
    from pipeline.decode.options import default_batch_size

    def whisper(layers: int, width: int, element_bytes: int) -> int:
        return 2 * layers * 1500 * width * element_bytes

    assert [default_batch_size(whisper(*shape)) for shape in [(6, 512, 4), (2, 1280, 4), (4, 384, 4)]] == [16] * 3
    assert [default_batch_size(whisper(*shape)) for shape in [(12, 768, 4), (32, 1280, 2), (24, 1024, 4)]] == [8] * 3
    models = tiny_random_models(base_vocabulary, seed=5, layers=3, d_model=96)
    encoded = torch.randn(1, 1500, 96)
    projected = CrossKV.project(models.main, encoded)
    held = sum(t.numel() * t.element_size() for t in projected.keys + projected.values)
    assert CrossKV.bytes_a_row(models.main) == held == whisper(3, 96, 4)
    assert Transcriber(models, DecodeOptions(language="en")).options.batch_size == 16
    assert Transcriber(models, DecodeOptions(language="en", batch_size=3)).options.batch_size == 3


@pytest.mark.identity
def test_a_batchs_keys_projected_a_few_rows_at_a_time_are_those_of_one_product(base_vocabulary):
    """``CrossKV.project`` projects a batch of more than ``PROJECT_ROWS`` rows a few at a time into the batch's
    tensors: for int8 (each row quantized on its own) the same bits as the rows projected one by one, and the
    same shapes and dtype as one product's."""
    from pipeline.decode import kv_cache

    models = int8_copy(tiny_random_models(base_vocabulary, seed=6, layers=2, d_model=64))
    encoded = torch.randn(2 * kv_cache.PROJECT_ROWS + 3, 1500, 64)
    batch = kv_cache.CrossKV.project(models.main, encoded)
    alone = [kv_cache.CrossKV.project(models.main, encoded[i : i + 1]) for i in range(encoded.shape[0])]
    for layer, (keys, values) in enumerate(zip(batch.keys, batch.values)):
        assert keys.shape == (encoded.shape[0], 4, 1500, 16) and keys.is_contiguous() and values.is_contiguous()
        assert torch.equal(keys, torch.cat([a.keys[layer] for a in alone]))
        assert torch.equal(values, torch.cat([a.values[layer] for a in alone]))
