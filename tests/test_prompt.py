"""Prompts (``initial_prompt``, ``hotwords``): the tokens before every piece, the no-speech probability, language
and average log-probability as transformers computes them with a prompt, and names that ``base`` misspells
coming out right with hotwords. Token identity with transformers' ``generate(prompt_ids=...)`` (plain and
speculative, batch 1 and 4, random weights and base): the prompt rows of test_identity.py's matrix.

The prompt is ``<|startofprev|>`` + the text tokens, before ``<|startoftranscript|><|lang|><|task|>``, in every
pass over every piece (podscribe decodes pieces independently).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from pipeline.audio import media
from pipeline.decode import DecodeOptions, Transcriber
from pipeline.decode.generate import Generator

# names base gets wrong in shared clips (LJ001-0007: "Guttenberg"; LJ001-0031: "Sué and Haim and Panerks ... Suviacol")
HOTWORDS = "Gutenberg, Sweynheim, Pannartz, Subiaco"
PROMPT = "A reading from William Morris on the history of printing."


def _features(models, pieces) -> torch.Tensor:
    return models.processor.feature_extractor(
        pieces, sampling_rate=media.SAMPLE_RATE, return_tensors="pt"
    ).input_features


# -- the prompt's tokens ----------------------------------------------------------------


def test_prompt_tokens_are_transformers_prompt_ids_and_faster_whispers_prompt(base_models):
    """A prompt alone is ``processor.get_prompt_ids(text)``; hotwords and a prompt are faster-whisper's
    ``get_prompt`` (hotwords first, then the previous text), and both go before the usual start."""
    fw_transcribe = pytest.importorskip("faster_whisper.transcribe")
    fw_tokenizer = pytest.importorskip("faster_whisper.tokenizer")
    processor, tok = base_models.processor, base_models.tokenizer
    g = Generator(base_models, timestamps=True, use_assistant=False)
    start = g.prompt("en", "transcribe")
    assert start == [tok.convert_tokens_to_ids(t) for t in ("<|startoftranscript|>", "<|en|>", "<|transcribe|>")]

    context = g.context(PROMPT, None)
    assert context == processor.get_prompt_ids(PROMPT).tolist()
    assert context[0] == tok.convert_tokens_to_ids("<|startofprev|>")
    assert g.context("  " + PROMPT + "\n", None) == context  # stripped, one leading space, as transformers does
    assert g.prompt("en", "transcribe", context) == context + start

    both = g.context(PROMPT, HOTWORDS)
    fw = fw_tokenizer.Tokenizer(tok.backend_tokenizer, True, task="transcribe", language="en")
    previous = fw.encode(" " + PROMPT.strip())  # faster-whisper's initial_prompt tokens (its previous text)
    expected = fw_transcribe.WhisperModel.get_prompt(SimpleNamespace(max_length=448), fw, previous, hotwords=HOTWORDS)
    assert g.prompt("en", "transcribe", both) == expected
    assert both == processor.get_prompt_ids(HOTWORDS + " " + PROMPT).tolist()  # one text, the same ids
    hot = g.context(None, HOTWORDS)
    assert g.prompt("en", "transcribe", hot) == fw_transcribe.WhisperModel.get_prompt(
        SimpleNamespace(max_length=448), fw, [], hotwords=HOTWORDS
    )
    assert tok.decode(both[1:]) == " " + HOTWORDS + " " + PROMPT


def test_long_prompts_keep_223_text_tokens(base_models):
    """openai-whisper's cut (n_ctx // 2 - 1 = 223 text tokens): the prompt's last ones; hotwords' first ones."""
    g = Generator(base_models, timestamps=True, use_assistant=False)
    tok = base_models.tokenizer
    words = " ".join(f"word{i}" for i in range(300))
    prompt_only = g.context(words, None)
    assert len(prompt_only) == 224 and prompt_only[1:] == tok.encode(" " + words, add_special_tokens=False)[-223:]
    hot_only = g.context(None, words)
    assert len(hot_only) == 224 and hot_only[1:] == tok.encode(" " + words, add_special_tokens=False)[:223]
    both = g.context(words, HOTWORDS)
    hot = tok.encode(" " + HOTWORDS, add_special_tokens=False)
    assert len(both) == 224 and both[1 : 1 + len(hot)] == hot
    assert both[1 + len(hot) :] == tok.encode(" " + words, add_special_tokens=False)[-(223 - len(hot)) :]
    assert g.context(words, words)[1:] == hot_only[1:]  # hotwords fill the room: no prompt left


def test_options_blank_prompts_and_special_tokens(base_models):
    assert DecodeOptions(initial_prompt="  \n", hotwords="").initial_prompt is None
    assert DecodeOptions(initial_prompt="  \n", hotwords="").hotwords is None
    assert DecodeOptions(hotwords=" Gutenberg\n").hotwords == "Gutenberg"  # one spelling (the config hash)
    with pytest.raises(ValueError, match="text"):
        DecodeOptions(initial_prompt=["Gutenberg"])
    assert Transcriber(base_models, DecodeOptions(language="en", initial_prompt=" ")).context == []
    with pytest.raises(ValueError, match="special token"):  # transformers' get_prompt_ids refuses these too
        Transcriber(base_models, DecodeOptions(language="en", initial_prompt="hello <|de|> world"))
    code = "import sys, pipeline.decode.options as o; o.DecodeOptions(hotwords='x'); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


# -- the decode stage: language, no-speech, log-prob ----------------------------------------


def test_language_no_speech_and_logprob_as_transformers_computes_them(base_models, clips):
    """With a prompt transformers detects the language from <|startoftranscript|> alone, reads the no-speech
    probability at <|startoftranscript|> after the prompt, and averages the log-probabilities of the rule-processed
    scores of the tokens (end-of-text included). The Transcriber gives the same three and the same tokens."""
    from transformers.generation.logits_process import WhisperNoSpeechDetection

    by_lang = {c.language: c for c in clips if c.path.parent.name == "picovoice_leopard"}
    pieces = [media.decode(by_lang[lang].path) for lang in ("en", "de")]
    options = DecodeOptions(language=None, hotwords="Quilter", initial_prompt=PROMPT, vad=False)
    results = Transcriber(base_models, options).transcribe(pieces)
    context = Generator(base_models, use_assistant=False).context(PROMPT, "Quilter")
    seen = []
    original = WhisperNoSpeechDetection.__call__

    def recording(self, input_ids, scores):
        out = original(self, input_ids, scores)
        if input_ids.shape[1] == self.begin_index:
            seen.append(float(self.no_speech_prob[0]))
        return out

    features = _features(base_models, pieces)
    with pytest.MonkeyPatch.context() as mp, torch.inference_mode():
        mp.setattr(WhisperNoSpeechDetection, "__call__", recording)
        for i, r in enumerate(results):
            seen.clear()
            out = base_models.transformers_main().generate(
                features[i : i + 1],
                return_timestamps=True,
                return_segments=True,
                num_beams=1,
                do_sample=False,
                temperature=0.0,
                task="transcribe",
                no_speech_threshold=0.6,
                logprob_threshold=-1.0,
                prompt_ids=torch.tensor(context),
            )
            segments = out["segments"][0]
            tokens = [int(t) for s in segments for t in s["tokens"]]
            detected = base_models.transformers_main().detect_language(features[i : i + 1])
            result = segments[0]["result"]  # one pass: its generate output, with the processed scores
            scores = torch.stack(result["scores"]).float()
            generated = result["sequences"][-scores.shape[0] :]
            avg = float(scores.log_softmax(-1).gather(-1, generated[:, None]).mean())
            assert len({id(s["result"]) for s in segments}) == 1, "expected one pass"
            assert r.tokens == tokens
            assert f"<|{r.language}|>" == base_models.tokenizer.convert_ids_to_tokens(int(detected[0]))
            assert r.no_speech_prob == pytest.approx(seen[0], abs=1e-5)
            assert r.avg_logprob == pytest.approx(avg, abs=1e-4)
    assert [r.language for r in results] == ["en", "de"]


def test_hotwords_spell_the_names_base_gets_wrong_and_words_stay_timed(base_models, clips):
    """LJ001-0007 and LJ001-0031 (LJ Speech): base writes "Guttenberg" and "Sué and Haim and Panerks ...
    Suviacol"; with the names as hotwords it writes them right. Word timings (aligned without the prompt, as
    openai-whisper does) stay inside their segments and in order."""
    by_name = {c.path.name: c for c in clips}
    pieces = [media.decode(by_name[n].path) for n in ("LJ001-0007.wav", "LJ001-0031.wav")]
    plain = Transcriber(base_models, DecodeOptions(language="en")).transcribe(pieces)
    before = [" ".join(s.text for s in r.segments) for r in plain]
    assert "Guttenberg" in before[0] and not {"Sweynheim", "Pannartz", "Subiaco"} & set(
        before[1].replace(",", "").split()
    )
    prompted = Transcriber(base_models, DecodeOptions(language="en", hotwords=HOTWORDS, word_timestamps=True))
    results = prompted.transcribe(pieces)
    after = [" ".join(s.text for s in r.segments) for r in results]
    assert "Gutenberg" in after[0] and "Guttenberg" not in after[0]
    assert all(name in after[1] for name in ("Sweynheim", "Pannartz", "Subiaco")), after[1]
    for r in results:
        assert r.avg_logprob > -0.5 and r.no_speech_prob < 0.1 and r.skipped is None
        last = 0.0
        for seg in r.segments:
            assert seg.words and "".join(w.word for w in seg.words).split() == seg.text.split()
            for w in seg.words:
                assert seg.start_s <= w.start_s <= w.end_s <= seg.end_s
                assert w.start_s >= last
                last = w.end_s
    words = {w.word.strip(" ,."): w for r in results for s in r.segments for w in s.words}
    assert all(words[n].end_s > words[n].start_s for n in ("Gutenberg", "Sweynheim", "Pannartz", "Subiaco"))


def test_transformers_asr_pipeline_with_prompt_ids(base_models, base_self_int8, clips):
    """``generate_kwargs={"prompt_ids": ...}`` through the ASR pipeline routed to podscribe's decoder (batch 2,
    with an assistant) gives what transformers' own pipeline gives with the main model alone."""
    from transformers import pipeline as hf_pipeline

    from pipeline.decode.hf_asr import asr_pipeline

    by_name = {c.path.name: c for c in clips}
    inputs = [
        {"raw": media.decode(by_name[n].path), "sampling_rate": media.SAMPLE_RATE}
        for n in ("LJ001-0007.wav", "LJ001-0031.wav")
    ]
    prompt_ids = base_models.processor.get_prompt_ids(HOTWORDS, return_tensors="pt")
    ours = asr_pipeline(base_models)
    reference = hf_pipeline(
        "automatic-speech-recognition",
        model=base_models.transformers_main(),
        tokenizer=ours.tokenizer,
        feature_extractor=ours.feature_extractor,
        device="cpu",
    )
    expected = reference(
        [dict(i) for i in inputs],
        batch_size=1,
        return_timestamps=True,
        generate_kwargs={"language": "en", "num_beams": 1, "prompt_ids": prompt_ids},
    )
    got = ours(
        [dict(i) for i in inputs],
        batch_size=2,
        return_timestamps=True,
        generate_kwargs={"language": "en", "prompt_ids": prompt_ids, "assistant_model": base_self_int8.assistant},
    )
    assert got == expected
    assert "Gutenberg" in got[0]["text"] and "Subiaco" in got[1]["text"]
    assert sum(s.drafted for s in ours.model.generate.last_stats) > 0, "the assistant never ran"
