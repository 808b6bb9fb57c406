"""Whisper generation with podscribe's own loop: prompts, passes over a piece, segments.

``Generator.generate`` returns what transformers' ``WhisperForConditionalGeneration.generate``
returns for greedy decoding of short-form (<= 30 s) input with ``return_segments=True`` —
token for token, segment for segment — whether or not an assistant drafts:

- one **pass** decodes the 30 s window from ``seek``. When the tokens end on a
  closed segment pair (``<|t1|><|t1|>``) or run out without closing, transformers
  does not trust the unfinished rest: it moves ``seek`` to the last timestamp and
  decodes the window again from there (features shifted and zero-padded, encoder
  rerun). That rule is reproduced here (``split_segments`` is its
  ``_retrieve_segment``), so a piece may take two or more passes;
- the segment times are ``seek`` (in 10 ms feature frames) plus the timestamp tokens;
- one departure, where the caller gives the rows' audio lengths (the stage does): a later pass starts only
  where audio is left (``audio_left``). transformers' short-form rule runs to the window's 3000 frames, so a
  last timestamp past the piece's end (22.00 in a 21.65 s piece) made it decode padding alone; openai-whisper
  stops at the audio's end (decision 0050). Every pass it does run is transformers' to the token;
- and a second, where the generator is given ``pass_tokens`` (the stage's generators are): a pass stops after
  that many tokens (openai-whisper's sample_len, 224), where transformers runs it on to Whisper's 448 positions
  (decision 0052). Only a pass longer than that moves: a loop, which the fallback then decodes again, or speech
  too dense for it, whose unfinished segment the next pass decodes again from its last timestamp;
- and a third, where the generator is given ``open_end_s`` with the audio lengths (the stage's are): a pass may not
  end right after opening a segment while ``open_end_s`` or more of the row's voice (its audio where no VAD ran)
  is left after that segment's start (``rules.py``); where it ends there with less left, or ends inside a segment
  it left open (whose text it keeps: ``unclosed_tail``), the piece is done (decision 0055). Only a pass cut at its
  token cap is followed by a later one. transformers would end there and decode the rest again as a
  window of its own (an encoder pass for the piece's last seconds, on unseen long-form one window in six); here
  the pass goes on and writes that rest in the window it has;
- and a fourth, where the generator is given ``looping`` (the stage's are): a greedy pass whose text so far loops
  (compressing more than twice as well as Whisper's loop threshold, checked every 16 tokens) stops there, and the
  piece goes to its second chance with no later pass (decision 0060); transformers and openai-whisper decode
  the loop to the pass's cap and then judge it.

A second chance runs here too, with its own search (``search.py``: beams, seeded sampling) in place of greedy
decoding and a cap on each pass's tokens (decision 0051).

Assistants: a decoder-only draft (Distil-Whisper's decoder, the int8 self-draft)
reads the main encoder's output; a seq2seq draft (tiny drafting for large) runs
its own encoder on its own features — transformers gets that kind wrong with
timestamps, this loop does not (tests/test_identity.py).

A previous-text **context** (``--initial-prompt``, ``--hotwords``) goes before the
start of transcript of every pass, as transformers puts ``prompt_ids`` there
(``context_tokens`` builds it; tests/test_identity.py compares token ids).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from ..facts.records import DecodeStats
from ..facts.runtime import return_freed_memory
from ..facts.whisper import ENCODER_STRIDE, HOP_SAMPLES, MEL_FRAME_S, SAMPLE_RATE, TIMESTAMP_S
from ..models.load import Models
from ..models.processor import LogMel
from .kv_cache import CrossKV, KVCacheDecoder
from .rules import WhisperRules
from .speculative import Decoded, DraftPolicy, greedy

# A second chance's search over one row loaded into the decoder: (decoder, prompt [1, P], rules, max length,
# end_from) -> tokens
Search = Callable[[KVCacheDecoder, torch.Tensor, WhisperRules, int, list[int] | None], Decoded]


@dataclass
class Generated:
    tokens: list[int]  # all passes' segment tokens (transformers' ``sequences`` row), no end-of-text
    segments: list[dict]  # {"start", "end" (s, piece-relative), "tokens" (list)}
    stats: DecodeStats = field(default_factory=DecodeStats)
    pass_lengths: list[int] = field(default_factory=list)  # how many of ``tokens`` each pass gave (rules restart)
    pass_ends: list[int] = field(default_factory=list)  # each pass's ``RuleState.end_from`` (the scoring's rules)
    ran_on: bool = False  # a pass used all its tokens without end-of-text (what a fallback attempt is judged by)
    looped: bool = False  # a pass was stopped as looping (``Generator``'s ``looping``): no later pass, a second chance
    # the loop's log-probability of each of ``tokens`` and of the end-of-text, where the scoring pass would score
    # what the loop computed (``loop_scores``); None: the scoring pass scores the row
    scores: list[float] | None = None


def log_mel(extractor, audio: list[np.ndarray], device, dtype) -> torch.Tensor:
    """Whisper's 3000-frame log-mel features of each piece, [rows, mels, 3000]. On the CPU a piece at a time:
    the same bits as the batch (each row's STFT and its max are its own; tested) at a fraction of the transient
    memory (padded float copies, the complex STFT; decision record 0009)."""
    if torch.device(device).type != "cpu":
        return extractor(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features.to(device, dtype)
    rows = [extractor([a], sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features for a in audio]
    return torch.cat(rows).to(device, dtype)


def encode(model: torch.nn.Module, features: torch.Tensor) -> torch.Tensor:
    """The encoder's output for rows of features. On the CPU a row at a time: the same bits as the batch (a
    row's sums do not depend on the rows beside it; tested), no slower and under half the batch's transient
    memory (the MLP's [rows x 1500, 2048] activations; decision record 0009); on CUDA the batch, which keeps the
    GPU busy."""
    encoder = model.get_encoder()
    if features.device.type != "cpu" or features.shape[0] == 1:
        return encoder(features).last_hidden_state
    return torch.cat([encoder(row[None]).last_hidden_state for row in features])


def context_tokens(
    tokenizer, prev_sot: int, eot: int, initial_prompt: str | None, hotwords: str | None, max_text: int = 223
) -> list[int]:
    """The previous-text context before ``<|startoftranscript|>``: ``<|startofprev|>`` then the text
    tokens of ``" " + hotwords.strip()`` and of ``" " + initial_prompt.strip()`` (faster-whisper's
    ``get_prompt`` order; a prompt alone gives transformers' ``get_prompt_ids``). At most ``max_text``
    text tokens (openai-whisper's n_ctx // 2 - 1): the first of the hotwords, then the last of the
    prompt. Empty when neither is given."""

    def encode(text: str) -> list[int]:
        ids = tokenizer.encode(" " + text.strip(), add_special_tokens=False)
        special = [t for t in ids if t >= eot]
        if special:  # transformers' get_prompt_ids refuses these too
            name = tokenizer.convert_ids_to_tokens(special[0])
            raise ValueError(f"the prompt text contains the special token {name!r}")
        return ids

    hot = encode(hotwords)[:max_text] if hotwords and hotwords.strip() else []
    room = max_text - len(hot)
    prompt = encode(initial_prompt) if initial_prompt and initial_prompt.strip() else []
    prompt = prompt[len(prompt) - room :] if len(prompt) > room else prompt
    text = hot + prompt
    return [prev_sot, *text] if text else []


def split_segments(seq: list[int], ts_begin: int, offset_s: float, window_frames: int) -> tuple[list[dict], int]:
    """transformers' ``_retrieve_segment``: segments of one pass and how far ``seek`` moves (frames)."""
    is_ts = [t >= ts_begin for t in seq]
    single_ending = is_ts[-2:] == [False, True]
    cuts = [i + 1 for i in range(len(is_ts) - 1) if is_ts[i] and is_ts[i + 1]]
    if not cuts:  # one segment: up to the last timestamp if any (but <|0.00|>), else the whole window
        stamps = [t for t, ts in zip(seq, is_ts) if ts]
        last = (
            stamps[-1] - ts_begin
            if stamps and stamps[-1] != ts_begin
            else int(window_frames * MEL_FRAME_S / TIMESTAMP_S)
        )
        return [{"start": offset_s, "end": offset_s + last * TIMESTAMP_S, "tokens": seq}], window_frames
    if single_ending:
        cuts.append(len(seq))
    else:
        cuts[-1] += 1
    segments, begin = [], 0
    for i, cut in enumerate(cuts):
        part = seq[begin:cut]
        end_index = -1 if i < len(cuts) - 1 or single_ending else -2
        segments.append(
            {
                "start": offset_s + (part[0] - ts_begin) * TIMESTAMP_S,
                "end": offset_s + (part[end_index] - ts_begin) * TIMESTAMP_S,
                "tokens": part,
            }
        )
        begin = cut
    if single_ending:
        return segments, window_frames
    return segments, (seq[begin - 2] - ts_begin) * ENCODER_STRIDE


def loop_scores(decoded, row: int, segments: list[dict]) -> bool:
    """Whether a pass's own log-probabilities stand for the row's in the scoring pass (``score.py``), so that it
    need not run: greedy decoding scored them (``Decoded.scores``: int8 on the CPU, where a verify step's logits
    are a one-token step's bits, ``KVCacheDecoder.row_exact``: the same scores with and without a draft), the pass
    ended with end-of-text, and its segments keep every token it decoded (transformers' rule drops an open tail's).
    The scoring pass feeds the row teacher-forced and gets the same logits up to the attention's summation order
    over more queries (int8 turns that into a rounding step now and then)."""
    return (
        row < len(decoded.scores)
        and decoded.finished[row]
        and [t for s in segments for t in s["tokens"]] == decoded.tokens[row]
        and len(decoded.scores[row]) == len(decoded.tokens[row]) + 1
    )


def unclosed_tail(seq: list[int], ts_begin: int, offset_s: float, audio_end_s: float) -> dict | None:
    """The segment a pass left open at its end-of-text (``... <|a|><|b|> text`` and no closing timestamp), from
    ``<|b|>`` to the end of the row's audio (piece-relative seconds), with the text after ``<|b|>``; None where the
    pass ended on a timestamp or had one segment only (transformers keeps those). transformers' rule drops that text
    and decodes the window again from ``<|a|>``: where the audio ended inside this window, the model wrote its last
    words having heard all of them (forced to go on instead, it invents more: decision 0055)."""
    if not seq or seq[-1] >= ts_begin:
        return None
    pairs = [i + 1 for i in range(len(seq) - 1) if seq[i] >= ts_begin and seq[i + 1] >= ts_begin]
    if not pairs:
        return None
    opening = pairs[-1]
    start = offset_s + (seq[opening] - ts_begin) * TIMESTAMP_S
    return {"start": start, "end": max(start, audio_end_s), "tokens": seq[opening + 1 :]}


def voice_until(spans: list[tuple[float, float]], from_s: float, need_s: float) -> float | None:
    """The latest time from which ``need_s`` of voice (``spans``, seconds) is still to come, no earlier than
    ``from_s``; None where less than that is heard after ``from_s``."""
    left = need_s
    for lo, hi in reversed(spans):
        lo = max(lo, from_s)
        if hi <= lo:
            continue
        if hi - lo >= left:
            return hi - left
        left -= hi - lo
    return None


def audio_left(seek_frames: int, frames: int, samples: list[int] | None, row: int) -> bool:
    """Whether a later pass from ``seek_frames`` has anything to read: the features go on (transformers' rule),
    and, where the row's audio length is known, the seek is inside its whole mel frames (openai-whisper's
    ``seek < content_frames``, ``n_samples // 160``). A piece is shorter than its 30 s window; Whisper's last
    timestamp can fall past the piece's end (22.00 in a 21.65 s piece), and a pass from there reads padding alone,
    which transformers' short-form generate decodes (unseen audio, 2026-12-07: 6 of 46 later passes, each a "you")."""
    if seek_frames >= frames:
        return False
    return samples is None or seek_frames < samples[row] // HOP_SAMPLES


class Generator:
    def __init__(
        self,
        models: Models,
        timestamps: bool = True,
        use_assistant: bool = True,
        policy: DraftPolicy | None = None,
        pass_tokens: int | None = None,
        open_end_s: float | None = None,
        looping: Callable[[list[int]], bool] | None = None,
    ):
        """``pass_tokens``: at most that many tokens a pass (the stage's: ``PASS_TOKENS``, openai-whisper's
        sample_len); None runs each pass to Whisper's 448 positions, as transformers' generate does.
        ``open_end_s``: a pass may not end right after opening a segment while this much of the row's voice (else
        audio) is left after its start, and a pass that ended is its piece's (the stage's: ``OPEN_END_S``; decision
        0055); None: transformers' rule. ``looping``: a greedy pass whose text so far this calls a loop stops there
        and is its piece's last (``speculative.greedy``; the stage's: decision 0060); None: no such stop."""
        self.models = models
        self.looping = looping
        self.pass_tokens = pass_tokens
        self.open_end_s = open_end_s
        main = models.main
        self.gen = main.generation_config
        self.timestamps = timestamps
        self.rules = WhisperRules(self.gen, main.config.vocab_size, timestamps, models.runtime.device)
        self.max_length = self.gen.max_length or main.config.max_target_positions
        self.max_positions = main.config.max_target_positions
        self.window = main.config.max_source_positions * ENCODER_STRIDE  # 3000 frames
        self.main = KVCacheDecoder(main)
        assistant = models.assistant if use_assistant else None
        self.draft = KVCacheDecoder(assistant, exact=False) if assistant is not None else None
        # a draft with an encoder of its own (WhisperForConditionalGeneration), not a decoder-only one
        self.seq2seq_draft = hasattr(getattr(assistant, "model", None), "encoder")
        self.draft_model = assistant
        self.draft_extractor = None
        if self.seq2seq_draft and assistant.config.num_mel_bins != main.config.num_mel_bins:
            self.draft_extractor = LogMel(feature_size=assistant.config.num_mel_bins)
        self.policy = policy or DraftPolicy()

    def draft_features(self, audio: list[np.ndarray]) -> torch.Tensor | None:
        """Features for a seq2seq draft whose mel bins differ from the main model's (else None: reuse the main's)."""
        if self.draft_extractor is None:
            return None
        return log_mel(self.draft_extractor, audio, self.models.runtime.device, self.draft_model.dtype)

    def context(self, initial_prompt: str | None, hotwords: str | None, limit: bool = True) -> list[int]:
        """The previous-text tokens for this model's tokenizer (see ``context_tokens``); ``limit=False``: all of
        them, to tell whether the limit cut any."""
        tokens = self.models.tokens
        most = self.max_positions // 2 - 1 if limit else 10**9
        return context_tokens(self.models.tokenizer, tokens.prev_sot, tokens.eot, initial_prompt, hotwords, most)

    def prompt(self, language: str | None, task: str = "transcribe", context: list[int] = ()) -> list[int]:
        """The decoder's start: ``context`` (``<|startofprev|>`` + text, or nothing), then
        ``<|startoftranscript|>``, language and task (multilingual models), ``<|notimestamps|>`` without timestamps."""
        return self.models.tokens.prompt(language, task, self.timestamps, context)

    @torch.inference_mode()
    def generate(
        self,
        features: torch.Tensor,
        prompts: list[list[int]],
        encoded: torch.Tensor | None = None,
        draft_features: torch.Tensor | None = None,
        cross: CrossKV | None = None,
        samples: list[int] | None = None,
        search: Search | None = None,
        max_new_tokens: int | None = None,
        voices: list[list[tuple[float, float]] | None] | None = None,
    ) -> list[Generated]:
        """Decode rows of 3000-frame features. ``encoded``: the main encoder's output for them, if at hand;
        ``cross``: the main model's cross-attention keys/values over it. The first pass reads them; a later
        pass writes its own window's into its rows, and they are projected back from ``encoded`` at the end
        (the caller's scoring reads them): a later pass's keys beside the batch's were the hour's memory peak.

        ``samples``: each row's audio length. A later pass then starts only where audio is left
        (``audio_left``), as openai-whisper's seek stops at the audio's end; without it every row runs to the
        3000 frames, as transformers' short-form generate does (a pass over padding alone).

        ``search``: a second chance's search (``search.Beams``, ``search.Sampling``; one row, the main model
        alone) instead of greedy decoding; ``max_new_tokens``: at most that many tokens a pass after the prompt
        (transformers' ``max_new_tokens``) instead of the generator's ``pass_tokens``. ``voices``: each row's voice
        as the VAD heard it (piece-relative seconds; None where not heard), what decision 0055's rule measures
        what is left by (else the audio's length)."""
        if cross is not None and encoded is None:
            raise ValueError("cross-attention keys/values come with the encoder output they were projected from")
        if search is not None and (self.draft is not None or features.shape[0] != 1):
            raise ValueError("a second chance's search decodes one piece with the main model alone")
        rows = features.shape[0]
        out = [Generated([], []) for _ in range(rows)]
        seek = [0] * rows
        pending = list(range(rows))
        first, npass = True, 0
        overwritten: set[int] = set()  # rows of ``cross`` holding a later window's keys
        while pending:
            npass += 1
            # transformers lets each pass run to max_length plus the prompt (its generate adds the prompt length,
            # at most 223, to its copy of max_length once per pass), never past the 448 positions: 448 for
            # Whisper's defaults. A previous-text context counts as prompt (it takes room from the text).
            grow = min(len(prompts[0]), self.max_positions // 2 - 1)
            limit = min(self.max_length + npass * grow, self.max_positions)
            cap = max_new_tokens if max_new_tokens is not None else self.pass_tokens
            if cap is not None:
                limit = min(len(prompts[0]) + cap, self.max_positions)
            feats = self._window(features, pending, seek)
            capacity = limit + self.policy.max_draft + 2
            if first and encoded is not None:
                enc = encoded
                self.main.start(enc, capacity, cross)
            else:
                enc = encode(self.models.main, feats)
                return_freed_memory()  # the encoder's freed pages, before the loop's caches are allocated
                if cross is not None:
                    cross.project_into(self.models.main, enc, pending)
                    overwritten |= set(pending)
                self.main.start(enc, capacity, cross, pending if cross is not None else None)
            if self.draft is not None:
                self.draft.start(self._draft_encoded(feats, draft_features, pending, seek, enc), capacity)
            ids = torch.tensor([prompts[b] for b in pending], device=features.device)
            ends = [self._end_from(samples, voices, b, seek[b]) for b in pending]
            try:
                if search is None:
                    decoded = greedy(
                        self.main, ids, self.rules, limit, self.draft, self.policy, ends, True, self.looping
                    )
                else:
                    decoded = search(self.main, ids, self.rules, limit, ends)
            finally:  # an abandoned second chance (a stop) too: its caches go now, not at the next start
                self.main.release()
                if self.draft is not None:
                    self.draft.release()
            still = []
            for j, b in enumerate(pending):
                window = min(self.window, features.shape[-1] - seek[b])
                offset_s = seek[b] * TIMESTAMP_S / ENCODER_STRIDE
                segs, moved = split_segments(decoded.tokens[j], self.rules.ts_begin, offset_s, window)
                if decoded.finished[j] and self._open_end(samples):  # decision 0055: a pass that ended is the piece's
                    tail = unclosed_tail(decoded.tokens[j], self.rules.ts_begin, offset_s, samples[b] / SAMPLE_RATE)
                    # an open last segment keeps its text; a pass that ended right after an opening timestamp had
                    # less than open_end_s of voice left, the rules allowed it only then
                    segs, moved = ([*segs, tail] if tail is not None else segs), max(moved, window)
                g = out[b]
                if first and loop_scores(decoded, j, segs):
                    g.scores = decoded.scores[j]
                g.segments += segs
                g.stats.passes += 1
                g.pass_lengths.append(sum(len(s["tokens"]) for s in segs))
                g.pass_ends.append(ends[j])
                g.stats.add(decoded.stats[j])
                g.ran_on = g.ran_on or not decoded.finished[j]
                g.looped = g.looped or (j < len(decoded.looped) and decoded.looped[j])
                seek[b] += moved
                if g.looped:  # its second chance decodes the piece again
                    continue
                if self.timestamps and moved > 0 and audio_left(seek[b], features.shape[-1], samples, b):
                    still.append(b)
                    g.scores = None  # a later pass reads this one's tokens as context: the scoring pass's row
            pending, first = still, False
        if overwritten:
            rows = sorted(overwritten)
            cross.project_into(self.models.main, encoded[rows], rows)
        for g in out:
            g.tokens = [t for s in g.segments for t in s["tokens"]]
        return out

    def _open_end(self, samples: list[int] | None) -> bool:
        """Whether decision 0055's rules hold for these rows: the stage's generator, the rows' lengths known."""
        return self.open_end_s is not None and samples is not None and self.timestamps

    def _end_from(self, samples: list[int] | None, voices, row: int, seek_frames: int) -> int:
        """The row's ``RuleState.end_from`` for a pass from ``seek_frames``: the first timestamp token from which
        less than ``open_end_s`` of the row's voice (the VAD's spans, where given) or else of its audio is left; 0
        (transformers' rules) where less than that is left at all, and without the lengths or the rule."""
        if not self._open_end(samples):
            return 0
        seek_s = seek_frames * HOP_SAMPLES / SAMPLE_RATE
        heard = voices[row] if voices is not None else None
        if heard is None:
            until_s = samples[row] / SAMPLE_RATE - self.open_end_s
        else:
            until_s = voice_until(heard, seek_s, self.open_end_s)
        if until_s is None or until_s <= seek_s:
            return 0
        return self.rules.ts_begin + math.floor(round((until_s - seek_s) / TIMESTAMP_S, 6)) + 1  # 1 s or more left

    def _window(self, features, rows, seek) -> torch.Tensor:
        """Each row's features from its seek on, zero-padded to the model's window (transformers' way)."""
        parts = []
        for b in rows:
            part = features[b : b + 1, :, seek[b] : seek[b] + self.window]
            parts.append(F.pad(part, (0, self.window - part.shape[-1])))
        return torch.cat(parts)

    def _draft_encoded(self, feats, draft_features, rows, seek, main_encoded) -> torch.Tensor:
        if not self.seq2seq_draft:
            return main_encoded
        own = feats if draft_features is None else self._window(draft_features, rows, seek)
        return encode(self.draft_model, own.to(self.draft_model.dtype))
