"""The parts of podscribe's own decoding loop that its token identity rests on: Whisper's rules as transformers'
logits processors apply them, the decoder's logits as transformers' forward gives them, a row's step independent
of the rows beside it, features and the encoder a piece at a time; rows leaving the batch, the draft policy,
transformers' ASR pipeline routed through the loop, jobs' draft statistics.

The token identity itself (the loop against transformers' ``generate``, drafts against none, batch sizes,
compute types, prompts): the matrix in test_identity.py.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers.generation.logits_process import (
    SuppressTokensAtBeginLogitsProcessor,
    SuppressTokensLogitsProcessor,
    WhisperTimeStampLogitsProcessor,
)

from helpers import decode_batches, tiny_random_models, tiny_whisper, with_assistant
from pipeline.audio import media
from pipeline.backend.quantize import quantize
from pipeline.decode import kv_cache
from pipeline.decode.generate import encode, log_mel
from pipeline.decode.kv_cache import KVCacheDecoder
from pipeline.decode.rules import RuleState, WhisperRules
from pipeline.decode.speculative import DraftPolicy


def _features(models, pieces) -> torch.Tensor:
    return models.processor.feature_extractor(
        pieces, sampling_rate=media.SAMPLE_RATE, return_tensors="pt"
    ).input_features


# -- the rules ---------------------------------------------------------------------


def test_rules_equal_transformers_processors(base_vocabulary):
    """Random prefixes (text, timestamps, pairs, <|0.00|>) and logits: same masked logits as transformers'."""
    gen = copy.deepcopy(base_vocabulary.generation_config)
    vocab = base_vocabulary.size
    ts_begin = gen.no_timestamps_token_id + 1
    rng = np.random.default_rng(0)
    for timestamps in (True, False):
        prompt = [gen.decoder_start_token_id, gen.lang_to_id["<|en|>"], gen.task_to_id["transcribe"]]
        if not timestamps:
            prompt.append(gen.no_timestamps_token_id)
        rules = WhisperRules(gen, vocab, timestamps, "cpu")
        processors = [
            SuppressTokensAtBeginLogitsProcessor(gen.begin_suppress_tokens, len(prompt)),
            SuppressTokensLogitsProcessor(gen.suppress_tokens),
        ]
        if timestamps:
            processors.append(WhisperTimeStampLogitsProcessor(gen, len(prompt)))
        for length in range(12):
            rows = 16
            seqs = []
            for _ in range(rows):
                seq = []
                for _ in range(length):
                    pick = rng.random()
                    seq.append(
                        int(rng.integers(0, 1000))
                        if pick < 0.5
                        else ts_begin
                        if pick < 0.55
                        else (
                            seq[-1]
                            if seq and seq[-1] >= ts_begin and pick < 0.75
                            else int(ts_begin + rng.integers(0, 1500))
                        )
                    )
                seqs.append(seq)
            ids = torch.tensor([prompt + s for s in seqs]).reshape(rows, len(prompt) + length)
            logits = torch.randn(rows, vocab) * 3
            logits[: rows // 2, ts_begin:] += 4  # timestamp mass high enough to trigger the log-prob rule
            expected = logits.clone()
            for proc in processors:
                expected = proc(ids, expected)
            state = RuleState.initial(rows, "cpu")
            for j in range(length):
                state = rules.advance(state, ids[:, len(prompt) + j])
            got = rules.apply(logits.clone()[:, None], state.positions())[:, 0]
            assert torch.equal(torch.isinf(got), torch.isinf(expected)), f"length {length}, timestamps {timestamps}"
            assert torch.equal(got.argmax(-1), expected.argmax(-1))


def test_no_end_right_after_an_opened_segment_while_audio_is_left(base_vocabulary):
    """Decision 0055: after ``<|a|><|b|>`` (a segment closed, the next opened) end-of-text is masked while ``<|b|>``
    is before the row's ``end_from``; not after the first timestamp alone, not after text, not from ``end_from`` on,
    and never with ``end_from`` 0 (transformers' rules, as the test above compares them). One rule for every
    position of a verify pass too (its states are stepped through the drafts)."""
    gen = copy.deepcopy(base_vocabulary.generation_config)
    rules = WhisperRules(gen, base_vocabulary.size, True, "cpu")
    ts, eot, text = rules.ts_begin, rules.eot, 400

    def text_favoured(positions: int) -> torch.Tensor:  # else the timestamps' mass rule masks all text, eot too
        logits = torch.zeros(1, positions, base_vocabulary.size)
        logits[..., ts:] = -10.0
        return logits

    seqs = {
        "opened at 1.00 s": ([ts, text, ts + 50, ts + 50], True),
        "the first timestamp": ([ts], False),
        "text after the opening": ([ts, text, ts + 50, ts + 50, text], False),
        "a segment closed": ([ts, text, ts + 50], False),
    }
    for name, (seq, masked) in seqs.items():
        for end_from, expect in ((ts + 51, masked), (ts + 50, False), (0, False)):
            state = RuleState.initial(1, "cpu", [end_from])
            for t in seq:
                state = rules.advance(state, torch.tensor([t]))
            logits = rules.apply(text_favoured(1), state.positions())
            assert bool(torch.isinf(logits[0, 0, eot])) == expect, (name, end_from - ts if end_from else 0)
    # a verify pass over drafts: the end-of-text masked after the pair (and first, where a timestamp must come)
    seq = [ts, text, ts + 50, ts + 50, text]
    states = rules.expand(RuleState.initial(1, "cpu", [ts + 51]), torch.tensor([seq]))
    logits = rules.apply(text_favoured(len(seq) + 1), states)
    assert torch.isinf(logits[0, :, eot]).tolist() == [True, False, False, False, True, False]


@pytest.mark.identity
def test_kv_cache_decoder_logits_equal_transformers_forward(base_vocabulary):
    """Rows at different lengths, fed in uneven chunks, give transformers' logits for their own prefixes."""
    models = tiny_random_models(base_vocabulary, 11)
    torch.manual_seed(0)
    encoded = torch.randn(3, 1500, 64)
    ids = torch.randint(0, 50000, (3, 24))
    expected = models.main(encoder_outputs=(encoded,), decoder_input_ids=ids).logits
    decoder = KVCacheDecoder(models.main)
    decoder.start(encoded, 64)
    lengths = torch.tensor([5, 9, 2])  # per-row prefill
    width = int(lengths.max())
    feed = torch.stack([torch.cat([ids[b, : lengths[b]], ids[b, : width - lengths[b]]]) for b in range(3)])
    # first call: every row starts at 0 with `width` tokens (the tail of short rows is scratch, overwritten later)
    decoder.forward(feed, torch.zeros(3, dtype=torch.long))
    got = []
    for step in range(6):  # then 2 tokens per row from each row's own length
        start = lengths + 2 * step
        chunk = torch.stack([ids[b, start[b] : start[b] + 2] for b in range(3)])
        got.append((start, decoder.forward(chunk, start)))
    for start, logits in got:
        for b in range(3):
            ref = expected[b, start[b] : start[b] + 2]
            assert torch.allclose(logits[b], ref, atol=1e-4), "decoder forward differs from transformers"


@pytest.mark.identity
@pytest.mark.parametrize("keys", [1500, 37])
def test_attention_gives_a_row_the_same_bits_whatever_rows_and_threads_share_the_call(keys):
    """torch's CPU attention at the decoder's shapes (one query over 1,500 encoder frames or a few dozen cached
    keys; base's 8 heads of 64): a row's result is bit for bit the same alone, beside up to 5 other rows, on 1, 2
    or 3 threads. MKL picks its products' code path by operand alignment, and torch's kernel gives each thread a
    scratch buffer at an unaligned offset, so a row's sums depended on which thread took it: on the rows beside
    it (base int8's long-form transcripts differed between --batch-size 4 and 8). ``pipeline`` sets MKL's strict
    reproducibility before torch loads (``runtime.REPRODUCIBLE_BLAS``); without it every call here but the
    one-thread ones differed (measured on AVX-512)."""
    torch.manual_seed(0)
    query, key, value = torch.randn(6, 8, 1, 64), torch.randn(6, 8, keys, 64), torch.randn(6, 8, keys, 64)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = [F.scaled_dot_product_attention(query[b : b + 1], key[b : b + 1], value[b : b + 1]) for b in range(6)]
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            for rows in range(1, 7):
                got = F.scaled_dot_product_attention(query[:rows], key[:rows], value[:rows])
                for b in range(rows):
                    assert torch.equal(got[b : b + 1], alone[b]), f"row {b} of {rows} on {n} threads"
    finally:
        torch.set_num_threads(threads)


def test_a_draft_reads_bf16_cross_attention_only_on_a_cpu_with_bf16_matrix_units(monkeypatch):
    """Half the bytes per step where bf16 products run in hardware (AMX); float32 elsewhere, where oneDNN
    reports bf16 support too but torch's bf16 attention took 5x the float32 time (a draft paid it every step).
    The main model reads float32 everywhere (it is exact)."""
    model = tiny_whisper()
    for units, draft_dtype in ((False, torch.float32), (True, torch.bfloat16)):
        monkeypatch.setattr(kv_cache, "cpu_has_bf16_units", lambda units=units: units)
        assert KVCacheDecoder(model, exact=False).cross_dtype == draft_dtype
        assert KVCacheDecoder(model).cross_dtype == torch.float32


@pytest.mark.identity
def test_a_rows_step_does_not_depend_on_how_far_the_rows_beside_it_are(base_vocabulary):
    """In int8 (row-exact linear layers), the main model's one-token and verify steps give a row bit-identical
    logits in a batch whose other rows are ahead or behind it and decoded alone: each row attends over exactly
    its own keys. An attention call's sums depend on the number of keys it runs over, masked ones too, and int8
    turns such a last bit into a whole quantization step (base int8 with its self-draft flipped a timestamp)."""
    model = quantize(copy.deepcopy(tiny_random_models(base_vocabulary, 11).main), "int8")
    torch.manual_seed(0)
    encoded = torch.randn(3, 1500, 64)
    ids = torch.randint(0, 50000, (3, 204))
    lengths = torch.tensor([5, 200, 70])  # far apart: the kernel sums keys in blocks

    def steps(rows: list[int]) -> list[torch.Tensor]:
        decoder = KVCacheDecoder(model)
        decoder.start(encoded[rows], 256)
        decoder.forward(ids[rows, :200], torch.zeros(len(rows), dtype=torch.long))  # the prefill, 200 for every row
        at = lengths[rows]
        one = decoder.forward(ids[rows, 200:201], at)  # a one-token step at each row's own length
        verify = decoder.forward(ids[rows, 201:204], at + 1, one_at_a_time=True)  # a verify step of three
        return [one, verify]

    together = steps([0, 1, 2])
    # bit for bit with every kernel family: the tolerance AVX2 once needed here (1.8e-7 on one row of the verify
    # step) was MKL's alignment-dependent path, which runtime.REPRODUCIBLE_BLAS closes
    for b in range(3):
        alone = steps([b])
        for got, want in zip(together, alone):
            assert torch.equal(got[b], want[0]), f"row {b} depends on the rows beside it"


@pytest.mark.identity
def test_the_int8_decoders_one_query_key_value_product_gives_the_three_products_bits(base_vocabulary):
    """The main model's int8 decoder projects query, key and value in one product (fewer calls a step); its logits
    are bit for bit those of three products, in a prefill, a step and a verify step. Float models keep three:
    a float product of stacked weights may round differently."""
    float_model = copy.deepcopy(tiny_random_models(base_vocabulary, 11).main)
    assert all(op.stacked is None for op in KVCacheDecoder(float_model).ops)
    model = quantize(float_model, "int8")
    torch.manual_seed(1)
    encoded = torch.randn(2, 1500, 64)
    ids = torch.randint(0, 50000, (2, 24))

    def logits(stacked: bool) -> list[torch.Tensor]:
        decoder = KVCacheDecoder(model)
        assert all((op.stacked is not None) for op in decoder.ops)
        if not stacked:
            for op in decoder.ops:
                op.stacked = None
        decoder.start(encoded, 32)
        start = torch.tensor([0, 0])
        prefill = decoder.forward(ids[:, :20], start)
        step = decoder.forward(ids[:, 20:21], start + 20)
        return [prefill, step, decoder.forward(ids[:, 21:24], start + 21, one_at_a_time=True)]

    for one, three in zip(logits(True), logits(False)):
        assert torch.equal(one, three)


@pytest.mark.identity
@pytest.mark.parametrize("compute_type", ["float32", "bfloat16", "int8"])
def test_features_and_encoder_a_piece_at_a_time_equal_the_batch(compute_type, base_models, eight_pieces):
    """On the CPU the log-mel features and base's encoder run a piece at a time (under half the memory, no
    slower): each piece's bits must be those of the batch, or its tokens would depend on the batch size."""
    model = copy.deepcopy(base_models.main)
    model = quantize(model, "int8") if compute_type == "int8" else model.to(getattr(torch, compute_type))
    batch = _features(base_models, eight_pieces[:4]).to(model.dtype)
    features = log_mel(base_models.processor.feature_extractor, eight_pieces[:4], "cpu", model.dtype)
    assert torch.equal(features, batch)
    with torch.inference_mode():
        assert torch.equal(encode(model, features), model.get_encoder()(batch).last_hidden_state)


# -- the loop's batches (its token identity: test_identity.py) ----------------------------------


def test_rows_of_very_different_lengths_leave_the_batch(base_self_int8, base_reference):
    """The 2 s row finishes long before the 30 s one; it leaves the batch and stops costing main calls."""
    features, reference = base_reference
    ours = decode_batches(base_self_int8, features[:2], True, 2)
    assert [g.tokens for g in ours] == [reference[0][0], reference[1][0]]
    short, long = ours
    assert short.stats.main_calls < long.stats.main_calls / 2


@pytest.mark.identity
def test_a_row_judged_looping_stops_at_that_check_with_and_without_a_draft(base_vocabulary, eight_pieces, monkeypatch):
    """``greedy``'s ``looping`` is asked of a row's first 16, 32, 48, ... tokens; the first it calls a loop ends the
    row there, unfinished and ``looped``, and the generator gives it no later pass. A draft commits several tokens
    a round, past a check: the row is still cut at the check, so the tokens are the same with and without one, and
    each first pass is a prefix of the one without the rule. Random weights babble to the length limit; the
    planted rule (a token sum divisible by 3) stands for any rule of the tokens; 60 s of features, so that a pass
    that ran on without the rule has a later one."""
    from pipeline.decode import generate
    from pipeline.decode.speculative import LOOP_CHECK_TOKENS
    from pipeline.models.load import quantized_self_draft

    main = tiny_random_models(base_vocabulary, 7)
    main.main.generation_config.max_length = 160
    drafted = with_assistant(main, quantized_self_draft(main.main), "self-int8")
    once = _features(main, eight_pieces[:4])
    features = torch.cat([once, once], -1)  # 60 s of features: a pass that ran on has a later one

    def looping(row: list[int]) -> bool:
        return sum(row) % 3 == 0

    def run(models, rule, use_assistant):
        """Each row's first pass as the loop gave it (tokens, looped), and the generator's rows."""
        passes, real = [], generate.greedy

        def recorded(*args, **kwargs):
            decoded = real(*args, **kwargs)
            passes.append(list(zip(decoded.tokens, decoded.looped or [False] * len(decoded.tokens))))
            return decoded

        monkeypatch.setattr(generate, "greedy", recorded)
        g = generate.Generator(models, timestamps=True, use_assistant=use_assistant, looping=rule)
        rows = g.generate(features, [g.prompt("en", "transcribe")] * features.shape[0])
        monkeypatch.setattr(generate, "greedy", real)
        return passes[0], rows

    (free_first, free), (first, alone), (drafted_first, with_draft) = (
        run(main, None, False),
        run(main, looping, False),
        run(drafted, looping, True),
    )
    assert first == drafted_first
    assert [(r.tokens, r.looped, r.stats.passes) for r in alone] == [
        (r.tokens, r.looped, r.stats.passes) for r in with_draft
    ]
    assert any(looped for _, looped in first) and any(r.stats.passes > 1 for r in free)
    for (tokens, looped), (whole, _), row, unruled in zip(first, free_first, alone, free):
        checks = range(LOOP_CHECK_TOKENS, len(tokens) + 1, LOOP_CHECK_TOKENS)
        assert tokens == whole[: len(tokens)]
        assert [n for n in checks if looping(tokens[:n])] == ([len(tokens)] if looped else [])
        assert row.looped == looped
        if looped:
            assert row.stats.passes == 1 and row.ran_on
        else:
            assert (row.tokens, row.segments) == (unruled.tokens, unruled.segments)


def test_draft_policy_follows_agreement_and_cost():
    policy = DraftPolicy(start=4)
    for _ in range(10):  # the draft always agrees, drafting is cheap: longer drafts
        policy.observe(4, [4, 4], draft_s=4 * 0.002, verify_s=0.02)
    assert policy.next(4) > 4
    policy = DraftPolicy(start=4)
    for _ in range(10):  # it agrees on one token in three, drafting costs half a verify: shorter drafts
        policy.observe(4, [0, 1], draft_s=4 * 0.01, verify_s=0.02)
    assert policy.next(4) < 4


def test_transformers_asr_pipeline_routed_through_podscribe(base_models, base_self_int8, eight_pieces):
    """transformers' ASR pipeline with an assistant_model at batch sizes > 1 (transformers alone refuses it)
    gives what transformers' own pipeline gives with the main model alone."""
    from transformers import pipeline as hf_pipeline

    from pipeline.decode.hf_asr import asr_pipeline

    ours = asr_pipeline(base_models)
    reference = hf_pipeline(
        "automatic-speech-recognition",
        model=base_models.transformers_main(),
        tokenizer=ours.tokenizer,
        feature_extractor=ours.feature_extractor,
        device="cpu",
    )
    inputs = [{"raw": p, "sampling_rate": media.SAMPLE_RATE} for p in eight_pieces[:5]]
    expected = reference(
        [dict(i) for i in inputs],
        batch_size=1,
        return_timestamps=True,
        generate_kwargs={"language": "en", "num_beams": 1},
    )
    assert all(e["chunks"] for e in expected)
    # every piece at batch 4, the language detected (en); two short ones alone, the language given
    for size, language, rows in ((4, {}, range(len(inputs))), (1, {"language": "en"}, [2, 3])):
        got = ours(
            [dict(inputs[r]) for r in rows],
            batch_size=size,
            return_timestamps=True,
            generate_kwargs={**language, "assistant_model": base_self_int8.assistant},
        )
        assert got == [expected[r] for r in rows], f"batch {size}, {language or 'language detected'}"
        assert sum(s.drafted for s in ours.model.generate.last_stats) > 0, "the assistant never ran"
    with pytest.raises(ValueError, match="greedy"):
        ours([dict(inputs[0])], generate_kwargs={"num_beams": 5})


def test_jobs_record_speculative_stats_and_the_auto_choice(base_models, base_self_int8, english_human, tmp_path):
    """A job with an assistant (fixed or auto) writes what it chose and per-piece draft statistics, and the same
    segments as a plain job."""
    import dataclasses

    import pyarrow.dataset as ds

    from pipeline.decode import DecodeOptions
    from pipeline.job.config import JobOptions
    from pipeline.job.run import run

    inputs = [str(c.path) for c in sorted(english_human, key=lambda c: c.path.name)[:3]]

    def job(models, name):
        out = tmp_path / name
        summary = run(
            inputs,
            JobOptions(out_dir=out, decode=DecodeOptions(language="en", batch_size=2), progress=False),
            models=models,
        )
        assert summary.done == 3
        files = ds.dataset(out / "files").to_table().to_pylist()
        pieces = ds.dataset(out / "pieces").to_table().to_pylist()
        segments = sorted(
            (r["path"], r["segment"], r["start_s"], r["end_s"], r["text"])
            for r in ds.dataset(out / "segments").to_table().to_pylist()
        )
        return files, pieces, segments

    plain_files, plain_pieces, plain_segments = job(base_models, "plain")
    assert {f["decode_mode"] for f in plain_files} == {"plain, batch 2"}
    assert all(p["drafted"] == p["accepted"] == 0 and p["main_calls"] > 0 for p in plain_pieces)

    files, pieces, segments = job(base_self_int8, "self-int8")
    assert segments == plain_segments
    assert {f["decode_mode"] for f in files} == {"speculative (self-int8), batch 2"}
    assert all(0 < p["accepted"] <= p["drafted"] and p["main_calls"] < p["n_tokens"] for p in pieces)
    assert sum(f["drafted"] for f in files) == sum(p["drafted"] for p in pieces)

    auto = dataclasses.replace(base_self_int8, auto=True)
    files, pieces, segments = job(auto, "auto")
    assert segments == plain_segments
    modes = {f["decode_mode"] for f in files}
    assert len(modes) == 1 and "(auto: plain@" in modes.pop() and {f["assistant"] for f in files} == {"auto:self-int8"}
    speculative = "speculative" in files[0]["decode_mode"].split(" (auto")[0]
    assert all((p["drafted"] > 0) == speculative for p in pieces)


def test_a_drafts_fused_projection_is_made_where_its_weights_are():
    """The draft's fused query/key/value layer lives on its layers' device: Whisper's key projection has no bias,
    and the zeros standing in for it were made on the CPU, so on CUDA every draft stopped before its first step
    (the first GPU run). The meta device stands in for a GPU here: a tensor made on the CPU cannot meet it."""
    from transformers import WhisperConfig, WhisperForCausalLM

    from pipeline.decode.kv_cache import fused_qkv

    config = WhisperConfig(
        d_model=64, decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=128, vocab_size=100, pad_token_id=0
    )
    config.is_encoder_decoder = False
    attn = WhisperForCausalLM(config).to("meta").model.decoder.layers[0].self_attn
    assert attn.k_proj.bias is None
    fused = fused_qkv(attn)
    assert fused.weight.device.type == fused.bias.device.type == "meta"
    assert fused.weight.shape == (3 * 64, 64)
