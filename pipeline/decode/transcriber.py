"""Decode stage: pieces of audio → token ids, piece-relative timestamped segments and stats.

Greedy decoding with Whisper's timestamp rules, token for token what
transformers' ``generate`` gives with the main model alone. Per batch:

1. pieces quieter than ``silence_db``, or where Silero VAD hears no voice,
   are not decoded at all;
2. the encoder runs once; one decoder step on ``<|startoftranscript|>`` gives
   the no-speech probability and, when no language is given, the language;
   with a prompt (``initial_prompt``, ``hotwords``) the no-speech probability is
   read at ``<|startoftranscript|>`` after the prompt, as transformers reads it,
   and the language still from ``<|startoftranscript|>`` alone (transformers'
   ``detect_language``);
3. podscribe's own loop (``generate.py``) produces the tokens for the whole
   batch — speculatively when there is an assistant (``speculative.py``);
4. one teacher-forced decoder pass scores the tokens (average log-probability
   under Whisper's logits rules, as transformers and openai-whisper score them),
   and Whisper's rule (no-speech prob high *and* log-prob low) drops silence;
   the same with a looping text (compression ratio > 2.4) drops music that
   the model "transcribes" as a repeated phrase. Greedy decoding has no
   temperature fallback, so a looping piece with speech keeps one copy of
   each repeated segment.

Word timings align the text after ``<|startoftranscript|>`` without the prompt, as
openai-whisper's and faster-whisper's ``find_alignment`` do.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import vad
from ..audio import SAMPLE_RATE, rms_db
from ..models.load import Models
from ..timing import Word, word_timings
from . import auto
from .generate import Generated, Generator
from .rules import RuleState
from .options import DecodeOptions


@dataclass
class RawSegment:
    start_s: float  # piece-relative
    end_s: float
    text: str
    n_tokens: int = 0  # text tokens (no timestamps) behind this segment
    words: list[Word] | None = None  # piece-relative, when word timestamps are on


@dataclass
class PieceResult:
    tokens: list[int] = field(default_factory=list)  # generated ids after the prompt, no end-of-text
    segments: list[RawSegment] = field(default_factory=list)
    language: str | None = None
    no_speech_prob: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    skipped: str | None = None  # "silence" | "no_voice" (VAD) | "no_speech" (Whisper): no text on purpose
    speech: list[tuple[float, float]] | None = None  # VAD spans, piece-relative
    main_calls: int = 0  # main-model decoder forward passes this piece took part in
    draft_calls: int = 0  # draft-model forward passes this piece took part in
    drafted: int = 0  # draft tokens proposed
    accepted: int = 0  # draft tokens kept (each equal to the main model's own choice)
    passes: int = 0  # decoding passes over the piece (transformers' seek rule may add a second)


def _special(tokenizer, *names: str) -> int | None:
    for name in names:
        tid = tokenizer.convert_tokens_to_ids(name)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            return tid
    return None


_NON_SPEECH = re.compile(r"^\s*([\[\(][^\]\)]*[\]\)]\s*)+$")


def is_non_speech_text(text: str) -> bool:
    """Whisper's ways of saying 'no words here': empty, only symbols (♪ ...), or only [bracketed] notes."""
    return not any(c.isalnum() for c in text) or bool(_NON_SPEECH.match(text))


def drop_repeats(segments: list[RawSegment], window: int = 4) -> list[RawSegment]:
    """Collapse a repetition loop: a segment whose text equals one of the last few kept ones goes."""
    kept: list[RawSegment] = []
    for seg in segments:
        key = seg.text.strip().lower()
        if key not in (k.text.strip().lower() for k in kept[-window:]):
            kept.append(seg)
    return kept


class Transcriber:
    def __init__(self, models: Models, options: DecodeOptions = DecodeOptions(), use_assistant: bool = True):
        self.models = models
        self.options = options
        tok = models.tokenizer
        gen = models.main.generation_config
        self.eot = gen.eos_token_id
        self.sot = gen.decoder_start_token_id
        self.no_speech = _special(tok, "<|nospeech|>", "<|nocaptions|>")
        self.multilingual = bool(getattr(gen, "is_multilingual", False))
        self.lang_to_id = dict(getattr(gen, "lang_to_id", None) or {})
        self.allowed_languages = {t: i for t, i in self.lang_to_id.items()
                                  if options.languages is None or t[2:-2] in options.languages}
        if self.multilingual and not self.allowed_languages:
            raise ValueError(f"none of the languages {options.languages} is known to {models.main_ref.name!r}")
        if not self.multilingual and options.language not in (None, "en", "english"):
            raise ValueError(f"model {models.main_ref.name!r} is English-only; it cannot take language={options.language!r}")
        if not self.multilingual and options.task == "translate":
            raise ValueError(f"model {models.main_ref.name!r} is English-only; it cannot translate")
        use_assistant = use_assistant and models.assistant is not None
        self.plain = Generator(models, timestamps=True, use_assistant=False)
        self.context = self.plain.context(options.initial_prompt, options.hotwords)  # [] without a prompt
        self.speculative = Generator(models, timestamps=True) if use_assistant else None
        self.choice: auto.Choice | None = None
        if not models.auto:
            self.choice = auto.Choice(use_assistant, options.batch_size,
                                      models.assistant_name if use_assistant else None)

    # -- public -----------------------------------------------------------------

    def transcribe(self, batch: list[np.ndarray], language: str | None = None) -> list[PieceResult]:
        """Decode up to ``batch_size`` pieces (each <= 30 s of 16 kHz mono float32); ``language`` overrides
        detection for this batch (a file's locked language)."""
        results, active = self._gate(batch)
        if active:
            self._decode([batch[i] for i in active], [results[i] for i in active], language)
        return results

    @torch.inference_mode()
    def detect(self, batch: list[np.ndarray]) -> list[tuple[str | None, float]]:
        """(language, seconds of voice) per piece, without decoding: what ``--language-mode file`` locks on.
        Pieces without a voice give (None, 0)."""
        results, active = self._gate(batch)
        out: list[tuple[str | None, float]] = [(None, 0.0)] * len(batch)
        if active:
            encoded = self._encode([batch[i] for i in active])
            _, languages = self._probe(encoded)
            for i, lang in zip(active, languages):
                voice = results[i].speech
                out[i] = (lang, sum(hi - lo for lo, hi in voice) if voice is not None else len(batch[i]) / SAMPLE_RATE)
        return out

    def _gate(self, batch: list[np.ndarray]) -> tuple[list[PieceResult], list[int]]:
        """Which pieces to decode: not silent (energy), with a voice (VAD)."""
        results = [PieceResult() for _ in batch]
        active = []
        for i, (a, r) in enumerate(zip(batch, results)):
            if rms_db(a) < self.options.silence_db or len(a) < 160:
                r.skipped = "silence"
                continue
            if self.options.vad:
                r.speech = vad.speech_spans(a, vad.VadOptions(threshold=self.options.vad_threshold))
                if sum(hi - lo for lo, hi in r.speech) < self.options.min_voice_s:
                    r.skipped = "no_voice"
                    continue
            active.append(i)
        return results, active

    # -- steps ------------------------------------------------------------------

    @torch.inference_mode()
    def _decode(self, audio: list[np.ndarray], results: list[PieceResult], language: str | None = None) -> None:
        features = self._features(audio)
        encoded = self.models.main.get_encoder()(features).last_hidden_state
        no_speech, languages = self._probe(encoded, language)
        for r, p, lang in zip(results, no_speech, languages):
            r.no_speech_prob, r.language = float(p), lang
        generated = self._generate(features, encoded, languages, audio, results)
        self._score(encoded, languages, generated, results)
        words = self._words(encoded, languages, generated, audio, results)
        for r, g, a, row_words in zip(results, generated, audio, words):
            tokens, segments = g.tokens, g.segments
            r.tokens = tokens
            text_bytes = self.models.tokenizer.decode(tokens, skip_special_tokens=True).encode()
            r.compression_ratio = len(text_bytes) / max(1, len(zlib.compress(text_bytes))) if text_bytes else 0.0
            looping = r.compression_ratio > self.options.compression_ratio_threshold
            if r.no_speech_prob > self.options.no_speech_threshold and (
                    r.avg_logprob < self.options.logprob_threshold or looping):
                r.skipped = "no_speech"
                continue
            all_segments = self.segments(segments, len(a) / SAMPLE_RATE)
            if r.speech is not None:
                for seg in all_segments:
                    seg.start_s, seg.end_s = vad.tighten(seg.start_s, seg.end_s, r.speech)
            if row_words is not None:
                attach_words(all_segments, row_words)
            kept = [s for s in all_segments if not is_non_speech_text(s.text)
                    and (r.speech is None or vad.overlaps(s.start_s, s.end_s, r.speech))]
            r.segments = drop_repeats(kept) if looping else kept

    def _words(self, encoded, languages, generated, audio, results) -> list[list[Word] | None]:
        if not self.options.word_timestamps:
            return [None] * len(generated)
        texts = [[t for t in g.tokens if t < self.eot] for g in generated]
        prompts = [self.plain.prompt(lang, self.options.task) for lang in languages]  # no context: whisper's way
        return word_timings(self.models, encoded, prompts, texts,
                            [len(a) / SAMPLE_RATE for a in audio])

    def _prompt(self, language: str | None) -> list[int]:
        return self.plain.prompt(language, self.options.task, self.context)

    def _features(self, audio: list[np.ndarray]) -> torch.Tensor:
        models = self.models
        features = models.processor.feature_extractor(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
        return features.to(models.runtime.device, models.runtime.dtype)

    def _encode(self, audio: list[np.ndarray]) -> torch.Tensor:
        return self.models.main.get_encoder()(self._features(audio)).last_hidden_state

    def _probe(self, encoded: torch.Tensor, language: str | None = None) -> tuple[list[float], list[str | None]]:
        """One decoder step on <|startoftranscript|>: no-speech probability and detected language.

        With a prompt, transformers reads the no-speech probability at <|startoftranscript|> after the
        prompt (WhisperNoSpeechDetection) but detects the language from <|startoftranscript|> alone:
        two short steps then, the second only when the language is to be detected."""
        n = encoded.shape[0]
        language = language or self.options.language
        detect = self.multilingual and not language
        logits = first_step_logits(self.models.main, encoded, self.context)
        no_speech = logits.softmax(-1)[:, self.no_speech].tolist() if self.no_speech is not None else [0.0] * n
        if not self.multilingual:
            return no_speech, ["en"] * n
        if not detect:
            code = _language_code(language, self.lang_to_id)
            return no_speech, [code] * n
        if self.context:
            logits = first_step_logits(self.models.main, encoded)
        return no_speech, most_likely_languages(logits, self.allowed_languages)

    def _generate(self, features, encoded, languages, audio, results) -> list[Generated]:
        """Token ids, segment dicts and pass lengths per row, from podscribe's own loop (speculative when chosen)."""
        prompts = [self._prompt(lang) for lang in languages]
        draft_features = self.speculative.draft_features(audio) if self.speculative is not None else None
        if self.choice is None:
            self.choice = auto.calibrate(self.plain, self.speculative, features, encoded, prompts,
                                         self.options.batch_size, self.models.assistant_name, draft_features)
        generator = self.speculative if self.choice.speculative else self.plain
        size = self.choice.batch_size
        generated = []
        for i in range(0, len(prompts), size):
            part = slice(i, i + size)
            generated += generator.generate(features[part], prompts[part], encoded[part],
                                            None if draft_features is None else draft_features[part])
        for r, g in zip(results, generated):
            r.main_calls, r.draft_calls = g.stats.main_calls, g.stats.draft_calls
            r.drafted, r.accepted, r.passes = g.stats.drafted, g.stats.accepted, g.passes
        return generated

    @property
    def mode(self) -> str:
        """How pieces are decoded (for the manifest): plain or speculative, batch size, auto's measurements."""
        return self.choice.describe() if self.choice is not None else "auto (not calibrated yet)"

    def _score(self, encoded, languages, generated: list[Generated], results) -> None:
        """Average log-probability of each sequence (with its end-of-text), one teacher-forced pass.

        Each token is scored as the decoder chose it: log-softmax of the logits after Whisper's rules
        (suppressed tokens, timestamp rules; restarted at each pass), as transformers' and
        openai-whisper's avg_logprob. Raw logits would charge a prompt for the timestamp the rules force
        first (the model wants text after a prompt: -14 instead of -2 on that token, enough to push a
        short piece under the log-prob threshold). A token the rules forbid where the teacher-forced row
        differs from the decoding (the end-of-text after a row cut at the length limit) keeps its raw score.
        """
        prompts = [self._prompt(lang) for lang in languages]
        limit = self.models.main.config.max_target_positions + 1  # a second pass can make a row longer
        rows = [(p + g.tokens + [self.eot])[:limit] for p, g in zip(prompts, generated)]
        width = max(map(len, rows))
        ids = torch.tensor([r + [self.eot] * (width - len(r)) for r in rows], device=encoded.device)
        logits = self.models.main(encoder_outputs=(encoded,), decoder_input_ids=ids[:, :-1]).logits
        rules = self.plain.rules
        for b, (r, p, row, g) in enumerate(zip(results, prompts, rows, generated)):
            n = len(row) - len(p)  # tokens scored: the sequence and its end-of-text, as far as the row holds them
            if n <= 0:
                r.avg_logprob = 0.0
                continue
            target = ids[b, len(p) : len(row), None]
            row_logits = logits[b : b + 1, len(p) - 1 : len(row) - 1].float()
            raw = row_logits.log_softmax(-1).gather(-1, target[None])[0, :, 0]
            ruled = rules.apply(row_logits, self._rule_states(g, n, encoded.device)).log_softmax(-1)
            ruled = ruled.gather(-1, target[None])[0, :, 0]
            r.avg_logprob = float(torch.where(torch.isinf(ruled), raw, ruled).mean())

    def _rule_states(self, g: Generated, n: int, device) -> RuleState:
        """The rules' state before each of the first ``n`` scored tokens ([1, n]); each pass starts afresh."""
        rules = self.plain.rules
        states, at = [], 0
        lengths = g.pass_lengths or [len(g.tokens)]
        for i, length in enumerate(lengths):
            chunk = torch.tensor([g.tokens[at : at + length]], dtype=torch.long, device=device).view(1, length)
            expanded = rules.expand(RuleState.initial(1, device), chunk)  # states before each token and after all
            keep = length + 1 if i == len(lengths) - 1 else length  # the last pass: also the end-of-text's
            states.append(RuleState(*(t[:, :keep] for t in (expanded.n_gen, expanded.last_ts, expanded.pen_ts,
                                                             expanded.ts_last))))
            at += length
        return RuleState(*(torch.cat([getattr(st, f) for st in states], 1)[:, :n]
                           for f in ("n_gen", "last_ts", "pen_ts", "ts_last")))

    def segments(self, generated: list[dict], duration_s: float) -> list[RawSegment]:
        """Text segments with piece-relative times, clamped into the piece."""
        out = []
        for seg in generated:
            ids = [t for t in seg["tokens"] if t < self.eot]
            text = self.models.tokenizer.decode(ids).strip()
            start = min(float(seg["start"]), duration_s)
            end = min(max(float(seg["end"]), start), duration_s)
            if text:
                out.append(RawSegment(round(start, 3), round(end, 3), text, len(ids)))
        return out


def attach_words(segments: list[RawSegment], words: list[Word]) -> None:
    """Give each segment the words made of its own tokens (matched by their characters, in order),
    timed inside the segment and monotonic."""
    text_words = iter(w for w in words if w.word.strip())
    pending: Word | None = None
    for seg in segments:
        seg.words = []
        target = "".join(seg.text.split())
        have = ""
        while len(have) < len(target):
            w = pending or next(text_words, None)
            pending = None
            if w is None:
                break
            piece = "".join(w.word.split())
            if have and not target.startswith(have + piece):
                pending = w
                break
            have += piece
            start = min(max(w.start_s, seg.start_s, seg.words[-1].end_s if seg.words else 0.0), seg.end_s)
            end = min(max(w.end_s, start), seg.end_s)
            seg.words.append(Word(w.word, round(start, 3), round(end, 3), w.probability))


def first_step_logits(model, encoded: torch.Tensor, context: list[int] = ()) -> torch.Tensor:
    """The decoder's logits at <|startoftranscript|> ([rows, vocab], float32), after ``context`` if any."""
    ids = torch.tensor([[*context, model.generation_config.decoder_start_token_id]] * encoded.shape[0],
                       device=encoded.device)
    return model(encoder_outputs=(encoded,), decoder_input_ids=ids).logits[:, -1].float()


def most_likely_languages(logits: torch.Tensor, lang_to_id: dict[str, int]) -> list[str]:
    """Language codes from first-step logits: the best language token per row (as transformers detects)."""
    names = {i: t[2:-2] for t, i in lang_to_id.items()}
    ids = torch.tensor(sorted(names), device=logits.device)
    return [names[i] for i in ids[logits[:, ids].argmax(-1)].tolist()]


def _language_code(language: str, lang_to_id: dict[str, int]) -> str:
    from transformers.models.whisper.tokenization_whisper import TO_LANGUAGE_CODE

    code = TO_LANGUAGE_CODE.get(language.lower(), language.lower())
    if f"<|{code}|>" not in lang_to_id:
        raise ValueError(f"unknown language {language!r} for this model")
    return code
