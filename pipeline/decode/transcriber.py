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
4. one teacher-forced decoder pass scores the tokens (average log-probability
   under Whisper's logits rules, as transformers and openai-whisper score them),
   and Whisper's rule (no-speech prob high *and* log-prob low) drops silence;
   the same with a looping text (compression ratio > 2.4) drops music that
   the model "transcribes" as a repeated phrase;
5. second chances (``recover.py``): a piece that fails Whisper's checks (loops, or
   log-prob < -1) is decoded again — beam search, then seeded sampling at rising
   temperatures — and the best result by Whisper's rule kept (before the no-speech
   rule, as openai-whisper orders them); voice the text does not cover is decoded
   again as short clips. The fallback runs the main model alone and the clips go
   through this same stage, so both are the same with and without an assistant.

Word timings align the text after ``<|startoftranscript|>`` without the prompt, as
openai-whisper's and faster-whisper's ``find_alignment`` do.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import zlib
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from .. import segments as cleanup
from .. import vad
from ..audio import SAMPLE_RATE, rms_db
from ..languages import CODE_OF_NAME
from ..models.load import Models
from ..records import DecodeStats, PieceResult, RawSegment, Redecode, Word
from ..runtime import return_freed_memory
from . import auto, recover
from .forced import first_step_logits, forced_hidden, padded, row_logits
from .generate import Generated, Generator, encode, log_mel
from .kv_cache import CrossKV
from .options import DecodeOptions
from .rules import RuleState
from .timing import word_timings

log = logging.getLogger("podscribe")

# The scoring pass normalises a row this many positions at a time (and projects four times as many at a time):
# a whole row's logits, its log-softmaxes and the rules' masks are a few copies of [positions, vocabulary] float32,
# which set the peak of any batch holding a long row — an hour of audio meets more of those than 3 minutes. Each
# position is normalised on its own: int8's output projection is row-exact, so its scores are the whole row's bits;
# float32's matrix product is blocked by its number of rows, so its scores may differ from the whole row's in the
# last bit (tested), the same on every run. Projecting fewer at a time re-reads float32's output weights once per
# product, which costs time. The measurements: docs/decisions/0009-memory-of-an-hour.md.
SCORE_CHUNK = 32


class Abandoned(Exception):
    """A stop was asked for while a piece was at its second chance (which can take minutes): its batch is
    dropped, and decoded again on resume (the same seeded result)."""


class Transcriber:
    stop: threading.Event | None = None  # set: a second chance in progress is abandoned (Abandoned)
    notify: Callable[[str], None] | None = None  # told when a piece goes to its second chance

    def __init__(self, models: Models, options: DecodeOptions | None = None, use_assistant: bool = True):
        self.models = models
        self.options = options = options or DecodeOptions()
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
        self.plain = Generator(models, timestamps=True, use_assistant=False)
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
        self.speculative = Generator(models, timestamps=True) if use_assistant else None
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
        results, active = self._gate(batch, voices)
        size = self.options.batch_size
        for at in range(0, len(active), size):
            rows = active[at : at + size]
            audio, found = [batch[i] for i in rows], [results[i] for i in rows]
            self._decode(audio, found, [language] * len(rows))
            if self.options.coverage:
                self._cover(audio, found)
        if not self.options.word_timestamps:  # words computed for the coverage check only
            for r in results:
                for seg in r.segments:
                    seg.words = None
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

    def _gate(
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
    def _decode(self, audio: list[np.ndarray], results: list[PieceResult], languages: list[str | None]) -> None:
        # The heap's free pages go back after each step (``return_freed_memory``): the steps allocate tensors of
        # different sizes, and glibc would keep each step's freed pages, so the steps' peaks would stack.
        # The main model's cross-attention keys/values are projected once here and read by the probe, the
        # decoding loop and the scoring pass: each projected its own before.
        features = self._features(audio)
        encoded = encode(self.models.main, features)
        return_freed_memory()  # before the projection: its keys would stack on the encoder's freed pages
        cross = CrossKV.project(self.models.main, encoded)
        no_speech, languages = self._probe(encoded, languages, cross)
        for r, p, lang in zip(results, no_speech, languages):
            r.no_speech_prob, r.language = float(p), lang
        generated = self._generate(features, encoded, languages, audio, results, cross)
        return_freed_memory()
        self._score(encoded, languages, generated, results, cross)
        del cross  # before the fallback: its beam search beside the batch's keys set the hour's peak
        return_freed_memory()
        for r, g in zip(results, generated):
            r.compression_ratio = self._compression(g.tokens)
        self._fallback(features, encoded, languages, generated, audio, results)
        found: list[list[RawSegment]] = []
        for r, g, a in zip(results, generated, audio):
            r.tokens = g.tokens
            if self._silent(r):
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

    def _silent(self, r: PieceResult) -> bool:
        """Whisper's no-speech rule: no-speech probability high and the text unsure (or looping)."""
        o = self.options
        return r.no_speech_prob > o.no_speech_threshold and (
            r.avg_logprob < o.logprob_threshold or r.compression_ratio > o.compression_ratio_threshold
        )

    def _compression(self, tokens: list[int]) -> float:
        text = self.models.tokenizer.decode(tokens, skip_special_tokens=True).encode()
        return len(text) / max(1, len(zlib.compress(text))) if text else 0.0

    def _fallback(self, features, encoded, languages, generated: list[Generated], audio, results) -> None:
        """Pieces failing Whisper's checks (and not silence) are decoded again — beam search, then seeded
        sampling at rising temperatures — by the main model alone, one at a time (the result does not
        depend on the batch), until one passes; the best by Whisper's rule is kept (``recover.better``)."""
        o = self.options
        for i, r in enumerate(results):
            best = recover.Candidate(r.avg_logprob, r.compression_ratio)
            if self._silent(r) or not recover.fails(best, o.logprob_threshold, o.compression_ratio_threshold):
                continue
            why = (
                f"compression ratio {best.compression_ratio:.2f}"
                if best.compression_ratio > o.compression_ratio_threshold
                else f"avg log-prob {best.avg_logprob:.2f}"
            )
            ladder = list(recover.fallbacks(o.fallback_beams))
            if ladder and self.notify is not None:
                self.notify(
                    f"a {len(audio[i]) / SAMPLE_RATE:.0f} s piece failed Whisper's checks ({why}): second chance "
                    f"({', '.join(label for label, _, _ in ladder[:2])}, ...; Ctrl-C abandons it, redone on resume)"
                )
            with self._abandon_on_stop():
                self._ladder(i, r, best, why, ladder, features, encoded, languages, generated, audio)

    @contextlib.contextmanager
    def _abandon_on_stop(self):
        """While a second chance runs, every main-model forward pass first checks for a stop."""
        stop = self.stop

        def check(_module, _args):
            if stop is not None and stop.is_set():
                raise Abandoned()

        handle = self.models.main.register_forward_pre_hook(check)
        try:
            if stop is not None and stop.is_set():
                raise Abandoned()
            yield
        finally:
            handle.remove()

    def _ladder(self, i, r, best, why, ladder, features, encoded, languages, generated, audio) -> None:
        """The attempts of one piece's second chance, until one passes Whisper's checks."""
        o = self.options
        for label, beams, temperature in ladder:
            again = self._again(features[i : i + 1], encoded[i : i + 1], languages[i], beams, temperature)
            trial = PieceResult()
            self._score(encoded[i : i + 1], languages[i : i + 1], [again], [trial])
            candidate = recover.Candidate(trial.avg_logprob, self._compression(again.tokens))
            keep = recover.better(best, candidate, o.logprob_threshold, o.compression_ratio_threshold)
            r.redecodes.append(
                Redecode(
                    0.0,
                    round(len(audio[i]) / SAMPLE_RATE, 3),
                    f"fallback: {why}; {label}: " + ("better" if keep else "not better"),
                    [t for t in again.tokens if t < self.tokens.eot] if keep else [],
                )
            )
            r.stats.main_calls += again.stats.main_calls
            r.stats.redecode_calls += again.stats.main_calls
            if keep:
                generated[i], best = again, candidate
                r.avg_logprob, r.compression_ratio = candidate.avg_logprob, candidate.compression_ratio
            if not recover.fails(best, o.logprob_threshold, o.compression_ratio_threshold):
                break

    def _fallback_tokens(self, language: str | None) -> int:
        """openai-whisper's sample length, less what a long prompt takes: transformers refuses a prompt plus new
        tokens past the model's positions (a 224-token prompt left 223)."""
        return min(recover.MAX_NEW_TOKENS, self.plain.max_positions - len(self._prompt(language)))

    def _again(self, features, encoded, language: str | None, beams: int, temperature: float) -> Generated:
        """One piece decoded by transformers' generate (main model; beam search or seeded sampling), as
        podscribe's loop returns it."""
        from .hf_generate import hf_generate

        cuda = [features.device.index or 0] if features.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):  # seeded here, the caller's random state untouched
            torch.manual_seed(recover.SEED)
            ((_, segments, (calls, _)),) = hf_generate(
                self.models.main,
                features,
                [language],
                True,
                None,
                encoded,
                self.options.task,
                self.context or None,
                beams,
                temperature,
                self._fallback_tokens(language),
            )
        segs = [
            {"start": float(seg["start"]), "end": float(seg["end"]), "tokens": [int(t) for t in seg["tokens"]]}
            for seg in segments or []
        ]
        ids = [t for seg in segs for t in seg["tokens"]]
        return Generated(ids, segs, DecodeStats(main_calls=calls, passes=1), pass_lengths=[len(ids)])

    def _cover(self, audio: list[np.ndarray], results: list[PieceResult]) -> None:
        """The coverage check (``recover.py``): voice no text covers is decoded again as short clips, in
        rounds while a round recovers something."""
        o = self.options
        attempts: list[list[tuple[float, float]]] = [[] for _ in results]
        for _ in range(recover.MAX_ROUNDS):
            jobs = []  # (row, gap, clip span), piece-relative seconds
            for i, (a, r) in enumerate(zip(audio, results)):
                if r.skipped or not r.speech:
                    continue
                for gap in recover.uncovered(r.speech, self._covered(r), o.coverage_gap_s):
                    span = recover.clip(gap, len(a) / SAMPLE_RATE)
                    if not recover.tried(span, attempts[i]):
                        attempts[i].append(span)
                        jobs.append((i, gap, span))
            if not jobs:
                return
            clips = [audio[i][int(lo * SAMPLE_RATE) : int(hi * SAMPLE_RATE)] for i, _, (lo, hi) in jobs]
            found, active = self._gate(clips)
            for at in range(0, len(active), o.batch_size):
                rows = active[at : at + o.batch_size]
                self._decode(
                    [clips[k] for k in rows], [found[k] for k in rows], [results[jobs[k][0]].language for k in rows]
                )
            progress = False
            for (i, gap, (lo, hi)), sub in zip(jobs, found):
                r = results[i]
                new = [
                    cleanup.shifted(s, lo)
                    for s in sub.segments
                    if recover.belongs(s.start_s + lo, s.end_s + lo, gap)
                    and not recover.echoes_around(s.text, r.segments, gap)
                ]
                r.redecodes += [
                    Redecode(round(d.start_s + lo, 3), round(d.end_s + lo, 3), d.reason, d.tokens)
                    for d in sub.redecodes
                ]
                r.redecodes.append(
                    Redecode(round(lo, 3), round(hi, 3), "uncovered speech", [t for s in new for t in s.ids])
                )
                # a clip's calls are all second-chance calls; passes count the piece's own
                r.stats.add(replace(sub.stats, passes=0, redecode_calls=sub.stats.main_calls))
                if new:
                    r.segments = recover.merge(r.segments, new)
                    progress = True
            if not progress:
                return

    def _covered(self, r: PieceResult) -> list[tuple[float, float]]:
        """What a piece's text covers: each segment's span, or its words' (padded) where the segment is
        thin for the speech in it and its words are known."""
        out = []
        for seg in r.segments:
            if seg.words and recover.thin(
                seg.start_s, seg.end_s, len(seg.text.split()), r.speech, self.options.coverage_gap_s
            ):
                out += [
                    (w.start_s - recover.WORD_PAD_S, w.end_s + recover.WORD_PAD_S) for w in seg.words if w.word.strip()
                ]
            else:
                out.append((seg.start_s, seg.end_s))
        return out

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

    def _prompt(self, language: str | None) -> list[int]:
        return self.plain.prompt(language, self.options.task, self.context)

    def _features(self, audio: list[np.ndarray]) -> torch.Tensor:
        runtime = self.models.runtime
        return log_mel(self.models.processor.feature_extractor, audio, runtime.device, runtime.dtype)

    def _encode(self, audio: list[np.ndarray]) -> torch.Tensor:
        return encode(self.models.main, self._features(audio))

    def _probe(
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
            return no_speech, [_language_code(lang, self.tokens.language_ids) for lang in wanted]
        if self.context:
            logits = first_step_logits(self.models.main, encoded, self.tokens.sot, cross=cross)
        detected = most_likely_languages(logits, self.allowed_languages)
        return no_speech, [
            _language_code(lang, self.tokens.language_ids) if lang else d for lang, d in zip(wanted, detected)
        ]

    def _generate(self, features, encoded, languages, audio, results, cross: CrossKV) -> list[Generated]:
        """Token ids, segment dicts and pass lengths per row, from podscribe's own loop (speculative when chosen)."""
        prompts = [self._prompt(lang) for lang in languages]
        draft_features = self.speculative.draft_features(audio) if self.speculative is not None else None
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
            )
        for r, g in zip(results, generated):
            r.stats = replace(g.stats)
        return generated

    @property
    def mode(self) -> str:
        """How pieces are decoded (for the manifest): plain or speculative, batch size, auto's measurements."""
        return self.choice.describe() if self.choice is not None else "auto (not calibrated yet)"

    def _score(self, encoded, languages, generated: list[Generated], results, cross: CrossKV | None = None) -> None:
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
        rows = [(p + g.tokens + [self.tokens.eot])[:limit] for p, g in zip(prompts, generated)]
        ids = padded(rows, self.tokens.eot, encoded.device)
        hidden = forced_hidden(self.models.main, encoded, ids[:, :-1], cross)
        rules = self.plain.rules
        for b, (r, p, row, g) in enumerate(zip(results, prompts, rows, generated)):
            n = len(row) - len(p)  # tokens scored: the sequence and its end-of-text, as far as the row holds them
            if n <= 0:
                r.avg_logprob = 0.0
                continue
            target = ids[None, b, len(p) : len(row), None]
            at_row = hidden[b : b + 1, len(p) - 1 : len(row) - 1]
            states = self._rule_states(g, n, encoded.device)
            scores, block = [], 4 * SCORE_CHUNK  # projected 4 chunks at a time (float32's weight read)
            for at in range(0, n, SCORE_CHUNK):  # a few positions at a time: bounded temporaries
                if at % block == 0:
                    logits = row_logits(self.models.main, at_row[:, at : at + block])
                part = logits[:, at % block : at % block + SCORE_CHUNK]
                chosen = target[:, at : at + SCORE_CHUNK]
                raw = part.log_softmax(-1).gather(-1, chosen)[0, :, 0]
                state = states.map(lambda t, at=at: t[:, at : at + SCORE_CHUNK])
                ruled = rules.apply(part, state).log_softmax(-1).gather(-1, chosen)[0, :, 0]
                scores.append(torch.where(torch.isinf(ruled), raw, ruled))
            r.avg_logprob = float(torch.cat(scores).mean())

    def _rule_states(self, g: Generated, n: int, device) -> RuleState:
        """The rules' state before each of the first ``n`` scored tokens ([1, n]); each pass starts afresh."""
        rules = self.plain.rules
        states, at = [], 0
        lengths = g.pass_lengths or [len(g.tokens)]
        for i, length in enumerate(lengths):
            chunk = torch.tensor([g.tokens[at : at + length]], dtype=torch.long, device=device).view(1, length)
            expanded = rules.expand(RuleState.initial(1, device), chunk)  # states before each token and after all
            keep = length + 1 if i == len(lengths) - 1 else length  # the last pass: also the end-of-text's
            states.append(expanded.map(lambda t, keep=keep: t[:, :keep]))
            at += length
        return RuleState.join(states, 1).map(lambda t: t[:, :n])

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


def _language_code(language: str, lang_to_id: dict[str, int]) -> str:
    code = CODE_OF_NAME.get(language.lower(), language.lower())
    if f"<|{code}|>" not in lang_to_id:
        raise ValueError(f"unknown language {language!r} for this model")
    return code
