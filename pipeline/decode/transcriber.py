"""Decode stage: pieces of audio → token ids, piece-relative timestamped segments and stats.

Greedy decoding with Whisper's timestamp rules, token for token what
transformers' ``generate`` gives with the main model alone. Per batch:

1. pieces quieter than ``silence_db``, or where Silero VAD hears no voice,
   are not decoded at all;
2. the encoder runs once and the main model's cross-attention keys/values are
   projected once (``kv_cache.CrossKV``: steps 2-4 read them); one decoder step on ``<|startoftranscript|>`` gives
   the no-speech probability and, when no language is given, the language;
   with a prompt (``initial_prompt``, ``hotwords``) the no-speech probability is
   read at ``<|startoftranscript|>`` after the prompt, as transformers reads it,
   and the language still from ``<|startoftranscript|>`` alone (transformers'
   ``detect_language``);
3. podscribe's own loop (``generate.py``) produces the tokens for the whole
   batch — speculatively when there is an assistant (``speculative.py``);
4. one teacher-forced decoder pass scores the tokens (``score.py``) (average log-probability
   under Whisper's logits rules, as transformers and openai-whisper score them),
   and Whisper's rule (no-speech prob high *and* log-prob low) drops silence;
   the same with a looping text (compression ratio > 2.4) drops music that
   the model "transcribes" as a repeated phrase;
5. second chances (``second_chances.py``; the decisions: ``recover.py``): a piece
   that fails Whisper's checks (loops, or log-prob < -1) is decoded again — beam search, then seeded sampling at rising
   temperatures — and the best result by Whisper's rule kept (before the no-speech
   rule, as openai-whisper orders them); voice the text does not cover is decoded
   again as short clips. The fallback runs the main model alone and the clips go
   through this same stage, so both are the same with and without an assistant.

Word timings align the text after ``<|startoftranscript|>`` without the prompt, as
openai-whisper's and faster-whisper's ``find_alignment`` do.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch

from ..audio import vad
from ..audio.media import SAMPLE_RATE, rms_db
from ..facts.records import PieceResult, RawSegment, Word
from ..facts.runtime import return_freed_memory
from ..facts.whisper import OPEN_END_S, PASS_TOKENS
from ..models.load import Models
from . import auto, recover, score, second_chances
from . import segments as cleanup
from .forced import first_step_logits
from .generate import Generated, Generator, encode, log_mel
from .kv_cache import CrossKV
from .options import DecodeOptions, default_batch_size
from .second_chances import Abandoned  # noqa: F401  (the job's workers catch it from here)
from .timing import word_timings

log = logging.getLogger("podscribe")

# A pass whose text so far compresses more than this many times Whisper's loop threshold (2 x 2.4) is stopped
# there: it loops, and its second chance decodes the piece again (decision 0060).
LOOP_STOP = 2.0


def loops(tokenizer, limit: float, tokens: list[int]) -> bool:
    """Whether a pass's text so far loops beyond doubt: its compression ratio above ``limit``."""
    return score.compression_ratio(tokenizer, tokens) > limit


@dataclass
class Heard:
    """A batch's first pass, before any token is decoded: its log-mel features, the encoder's states, the main
    model's cross-attention keys and values (None where not asked for), and per piece the no-speech probability
    and the language (given, or detected)."""

    features: torch.Tensor
    encoded: torch.Tensor
    cross: CrossKV | None
    no_speech: list[float]
    languages: list[str]


class Transcriber:
    stop: threading.Event | None = None  # set: a second chance in progress is abandoned (Abandoned)
    notify: Callable[[str], None] | None = None  # told when a piece goes to its second chance

    def __init__(self, models: Models, options: DecodeOptions | None = None, use_assistant: bool = True):
        self.models = models
        options = options or DecodeOptions()
        if options.batch_size is None:  # by the model: how much its rows' cross-attention keys take
            options = replace(options, batch_size=default_batch_size(CrossKV.bytes_a_row(models.main)))
        self.options = options
        self.tokens = tokens = models.tokens
        self.multilingual = tokens.multilingual
        self.allowed_languages = {
            t: i for t, i in tokens.language_ids.items() if options.languages is None or t[2:-2] in options.languages
        }
        if self.multilingual and not self.allowed_languages:
            raise ValueError(f"none of the languages {options.languages} is known to {models.main_ref.name!r}")
        if not self.multilingual and options.language not in (None, "en", "english"):
            raise ValueError(
                f"model {models.main_ref.name!r} is English-only; it cannot take language={options.language!r}"
            )
        if not self.multilingual and options.task == "translate":
            raise ValueError(f"model {models.main_ref.name!r} is English-only; it cannot translate")
        use_assistant = use_assistant and models.assistant is not None
        looping = functools.partial(loops, models.tokenizer, LOOP_STOP * options.compression_ratio_threshold)
        self.plain = Generator(
            models,
            timestamps=True,
            use_assistant=False,
            pass_tokens=PASS_TOKENS,
            open_end_s=OPEN_END_S,
            looping=looping,
        )
        self.context = self.plain.context(options.initial_prompt, options.hotwords)  # [] without a prompt
        whole = self.plain.context(options.initial_prompt, options.hotwords, limit=False)
        if len(whole) > len(self.context):  # said once, before any decoding
            log.warning(
                "--initial-prompt/--hotwords: %d tokens, but only %d fit before a piece (Whisper's limit, half its "
                "%d positions): the first of the hotwords and the last of the prompt are kept",
                len(whole) - 1,
                len(self.context) - 1,
                self.plain.max_positions,
            )
        self.speculative = (
            Generator(models, timestamps=True, pass_tokens=PASS_TOKENS, open_end_s=OPEN_END_S, looping=looping)
            if use_assistant
            else None
        )
        self.choice: auto.Choice | None = None
        if not models.auto:
            self.choice = auto.Choice(
                use_assistant, options.batch_size, models.assistant_name if use_assistant else None
            )

    # -- public -----------------------------------------------------------------

    def transcribe(
        self, batch: list[np.ndarray], language: str | None = None, voices: list[vad.Voice | None] | None = None
    ) -> list[PieceResult]:
        """Decode up to ``batch_size`` pieces (each <= 30 s of 16 kHz mono float32); ``language`` overrides
        detection for this batch (a file's locked language); ``voices``: the pieces' VAD, where it was
        computed ahead (``vad.voice`` with this transcriber's threshold), else computed here."""
        results, active = self.gate(batch, voices)
        size = self.options.batch_size
        for at in range(0, len(active), size):
            rows = active[at : at + size]
            audio, found = [batch[i] for i in rows], [results[i] for i in rows]
            self.decode(audio, found, [language] * len(rows))
            if self.options.coverage:
                second_chances.cover(self, audio, found)
        if not self.options.word_timestamps:  # words computed for the coverage check only
            for r in results:
                for seg in r.segments:
                    seg.words = None
        return results

    @torch.inference_mode()
    def detect(self, batch: list[np.ndarray]) -> list[tuple[str | None, float]]:
        """(language, seconds of voice) per piece, without decoding: what ``--language-mode file`` locks on.
        Pieces without a voice give (None, 0)."""
        results, active = self.gate(batch)
        out: list[tuple[str | None, float]] = [(None, 0.0)] * len(batch)
        if active:
            encoded = self._encode([batch[i] for i in active])
            _, languages = self.probe(encoded)
            for i, lang in zip(active, languages):
                voice = results[i].speech
                out[i] = (lang, sum(hi - lo for lo, hi in voice) if voice is not None else len(batch[i]) / SAMPLE_RATE)
        return out

    def gate(
        self, batch: list[np.ndarray], voices: list[vad.Voice | None] | None = None
    ) -> tuple[list[PieceResult], list[int]]:
        """Which pieces to decode: not silent (energy), with a voice (VAD)."""
        results = [PieceResult() for _ in batch]
        active = []
        for i, (a, r) in enumerate(zip(batch, results)):
            if rms_db(a) < self.options.silence_db or len(a) < 160:
                r.skipped = "silence"
                continue
            if self.options.vad:
                heard = voices[i] if voices is not None and voices[i] is not None else self.voice(a)
                r.speech, r.voice = heard.padded, heard.spans
                if sum(hi - lo for lo, hi in r.speech) < self.options.min_voice_s:
                    r.skipped = "no_voice"
                    continue
            active.append(i)
        return results, active

    def voice(self, samples: np.ndarray) -> vad.Voice:
        """The VAD of one piece, as the gate computes it (the runner computes it ahead, off the model's thread)."""
        return vad.voice(samples, vad.VadOptions(threshold=self.options.vad_threshold))

    # -- steps ------------------------------------------------------------------

    @torch.inference_mode()
    def decode(self, audio: list[np.ndarray], results: list[PieceResult], languages: list[str | None]) -> None:
        # The heap's free pages go back after each step (``return_freed_memory``): the steps allocate tensors of
        # different sizes, and glibc would keep each step's freed pages, so the steps' peaks would stack.
        # The main model's cross-attention keys/values are projected once here and read by the probe, the
        # decoding loop and the scoring pass: each projected its own before.
        heard = self.first_pass(audio, languages)
        features, encoded, cross, languages = heard.features, heard.encoded, heard.cross, heard.languages
        for r, p, lang in zip(results, heard.no_speech, languages):
            r.no_speech_prob, r.language = float(p), lang
        generated = self.generate(features, encoded, languages, audio, results, cross)
        return_freed_memory()
        self.score(encoded, languages, generated, results, cross)
        del cross  # before the fallback: its beam search beside the batch's keys set the hour's peak
        return_freed_memory()
        for r, g in zip(results, generated):
            r.compression_ratio = score.compression_ratio(self.models.tokenizer, g.tokens)
        second_chances.fallback(self, second_chances.Batch(features, encoded, languages, generated, audio, results))
        found: list[list[RawSegment]] = []
        for r, g, a in zip(results, generated, audio):
            r.tokens = g.tokens
            if score.silent(r, self.options):
                r.skipped = "no_speech"
                found.append([])
                continue
            segments = self.segments(g.segments, len(a) / SAMPLE_RATE)
            cleanup.tighten(segments, r.speech, r.voice)
            found.append(segments)
        words = self._words(encoded, languages, generated, audio, results, found)
        for r, segments, row_words in zip(results, found, words):
            looped = r.compression_ratio > self.options.compression_ratio_threshold
            r.segments = cleanup.clean(segments, row_words, r.speech, looped)

    def _words(self, encoded, languages, generated, audio, results, found) -> list[list[Word] | None]:
        """Word timings for the rows that want them: all with word timestamps on; else, for the coverage
        check, the rows with a segment too thin for its speech (``recover.thin``)."""
        o = self.options
        rows = [
            i
            for i, (r, segments) in enumerate(zip(results, found))
            if segments
            and (
                o.word_timestamps
                or (
                    o.coverage
                    and r.speech
                    and any(
                        recover.thin(s.start_s, s.end_s, len(s.text.split()), r.speech, o.coverage_gap_s)
                        for s in segments
                    )
                )
            )
        ]
        out: list[list[Word] | None] = [None] * len(generated)
        if not rows:
            return out
        texts = [[t for t in generated[i].tokens if t < self.tokens.eot] for i in rows]
        prompts = [self.plain.prompt(languages[i], o.task) for i in rows]  # no context: whisper's way
        timed = word_timings(self.models, encoded[rows], prompts, texts, [len(audio[i]) / SAMPLE_RATE for i in rows])
        for i, row_words in zip(rows, timed):
            out[i] = row_words
        return out

    def first_pass(self, audio: list[np.ndarray], languages: list[str | None], cross: bool = True) -> Heard:
        """What every decode of these pieces starts from (and a draft's training labels, distill/data.py): features,
        encoder, the cross-attention projection (``cross``), then the first step's no-speech and language."""
        features = self.features(audio)
        encoded = encode(self.models.main, features)
        return_freed_memory()  # before the projection: its keys would stack on the encoder's freed pages
        kv = CrossKV.project(self.models.main, encoded) if cross else None
        no_speech, languages = self.probe(encoded, languages, kv)
        return Heard(features, encoded, kv, no_speech, languages)

    def prompt(self, language: str | None) -> list[int]:
        return self.plain.prompt(language, self.options.task, self.context)

    def features(self, audio: list[np.ndarray]) -> torch.Tensor:
        runtime = self.models.runtime
        return log_mel(self.models.processor.feature_extractor, audio, runtime.device, runtime.dtype)

    def _encode(self, audio: list[np.ndarray]) -> torch.Tensor:
        return encode(self.models.main, self.features(audio))

    def probe(
        self, encoded: torch.Tensor, languages: list[str | None] | None = None, cross: CrossKV | None = None
    ) -> tuple[list[float], list[str | None]]:
        """One decoder step on <|startoftranscript|>: no-speech probability and, for rows without a
        language (``languages``, else the options'), the detected one.

        With a prompt, transformers reads the no-speech probability at <|startoftranscript|> after the
        prompt (WhisperNoSpeechDetection) but detects the language from <|startoftranscript|> alone:
        two short steps then, the second only when a language is to be detected."""
        n = encoded.shape[0]
        wanted = [lang or self.options.language for lang in (languages or [None] * n)]
        logits = first_step_logits(self.models.main, encoded, self.tokens.sot, self.context, cross)
        no_speech = (
            logits.softmax(-1)[:, self.tokens.no_speech].tolist() if self.tokens.no_speech is not None else [0.0] * n
        )
        if not self.multilingual:
            return no_speech, ["en"] * n
        if all(wanted):
            return no_speech, [self.tokens.language(lang) for lang in wanted]
        if self.context:
            logits = first_step_logits(self.models.main, encoded, self.tokens.sot, cross=cross)
        detected = most_likely_languages(logits, self.allowed_languages)
        return no_speech, [self.tokens.language(lang) if lang else d for lang, d in zip(wanted, detected)]

    def generate(self, features, encoded, languages, audio, results, cross: CrossKV) -> list[Generated]:
        """Token ids, segment dicts and pass lengths per row, from podscribe's own loop (speculative when chosen)."""
        prompts = [self.prompt(lang) for lang in languages]
        draft_features = self.speculative.draft_features(audio) if self.speculative is not None else None
        samples = [len(a) for a in audio]
        voices = [r.voice for r in results]  # where the VAD heard voice (decision 0055's rule measures by it)
        if self.choice is None:
            self.choice = auto.calibrate(
                self.plain,
                self.speculative,
                features,
                encoded,
                prompts,
                self.options.batch_size,
                self.models.assistant_name,
                draft_features,
                cross=cross,
                samples=samples,
                voices=voices,
            )
        generator = self.speculative if self.choice.speculative else self.plain
        size = self.choice.batch_size
        generated = []
        for i in range(0, len(prompts), size):
            part = slice(i, i + size)
            generated += generator.generate(
                features[part],
                prompts[part],
                encoded[part],
                None if draft_features is None else draft_features[part],
                cross.rows(part),
                samples[part],
                voices=voices[part],
            )
        for r, g in zip(results, generated):
            r.stats = replace(g.stats)
        return generated

    @property
    def mode(self) -> str:
        """How pieces are decoded (for the manifest): plain or speculative, batch size, auto's measurements."""
        return self.choice.describe() if self.choice is not None else "auto (not calibrated yet)"

    def score(self, encoded, languages, generated: list[Generated], results, cross: CrossKV | None = None) -> None:
        """Each row's average log-probability under Whisper's rules (``score.avg_logprobs``)."""
        prompts = [self.prompt(lang) for lang in languages]
        score.avg_logprobs(
            self.models.main, self.plain.rules, self.tokens.eot, encoded, prompts, generated, results, cross
        )

    def segments(self, generated: list[dict], duration_s: float) -> list[RawSegment]:
        """Text segments with piece-relative times, clamped into the piece."""
        out = []
        for seg in generated:
            ids = [t for t in seg["tokens"] if t < self.tokens.eot]
            text = self.models.tokenizer.decode(ids).strip()
            start = min(float(seg["start"]), duration_s)
            end = min(max(float(seg["end"]), start), duration_s)
            if text:
                out.append(RawSegment(round(start, 3), round(end, 3), text, len(ids), ids=ids))
        return out


def most_likely_languages(logits: torch.Tensor, lang_to_id: dict[str, int]) -> list[str]:
    """Language codes from first-step logits: the best language token per row (as transformers detects)."""
    names = {i: t[2:-2] for t, i in lang_to_id.items()}
    ids = torch.tensor(sorted(names), device=logits.device)
    return [names[i] for i in ids[logits[:, ids].argmax(-1)].tolist()]
