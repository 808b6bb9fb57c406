"""Whisper's facts, in one place: its time constants (derived in one block, as openai/whisper's
audio.py does) and its special tokens (``Tokens``, read once from a model's generation config and
tokenizer, in the manner of openai/whisper's ``Tokenizer``).

Light on purpose (no torch): the audio stage, the manifest and the CLI read the constants too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .languages import CODE_OF_NAME

# -- time -----------------------------------------------------------------------------------------------------
SAMPLE_RATE = 16000  # Hz: what every Whisper model hears
HOP_SAMPLES = 160  # samples per log-mel frame
MEL_FRAME_S = HOP_SAMPLES / SAMPLE_RATE  # 0.01 s
ENCODER_STRIDE = 2  # log-mel frames per encoder position (the second convolution's stride)
ENCODER_FRAMES_PER_S = SAMPLE_RATE // (HOP_SAMPLES * ENCODER_STRIDE)  # 50: what cross-attention resolves
ENCODER_FRAME_S = 1 / ENCODER_FRAMES_PER_S  # 0.02 s
WINDOW_S = 30  # every input is padded or cut to this
WINDOW_MEL_FRAMES = WINDOW_S * SAMPLE_RATE // HOP_SAMPLES  # 3000
TIMESTAMP_S = 0.02  # seconds per timestamp token: <|0.00|>, <|0.02|>, ... <|30.00|>
PASS_TOKENS = 224  # openai-whisper's sample_len (n_text_ctx // 2): the most tokens a pass decodes; a loop ends there
# a pass may not end right after opening a segment while this much voice (the VAD's; else audio) is left after its
# start (decision 0055: transformers would decode that rest again as a window of its own)
OPEN_END_S = 1.0


# -- tokens ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tokens:
    """The special token ids of one Whisper model and the prompts made of them."""

    sot: int  # <|startoftranscript|>
    eot: int  # <|endoftext|>: every id at or above it is special (timestamps included)
    no_timestamps: int  # <|notimestamps|>
    prev_sot: int | None  # <|startofprev|>: the previous-text context starts with it
    no_speech: int | None  # <|nospeech|> (<|nocaptions|> in older vocabularies)
    multilingual: bool
    language_ids: dict[str, int] = field(default_factory=dict)  # "<|en|>" -> id
    task_ids: dict[str, int] = field(default_factory=dict)  # "transcribe" -> id (the id of <|transcribe|>)

    @property
    def timestamp_begin(self) -> int:
        """<|0.00|>: timestamps follow <|notimestamps|> in every Whisper vocabulary."""
        return self.no_timestamps + 1

    @classmethod
    def of(cls, generation_config, tokenizer=None) -> Tokens:
        g = generation_config
        prev_sot = getattr(g, "prev_sot_token_id", None)
        if prev_sot is None and tokenizer is not None:
            prev_sot = _special(tokenizer, "<|startofprev|>")
        return cls(
            sot=g.decoder_start_token_id,
            eot=g.eos_token_id,
            no_timestamps=g.no_timestamps_token_id,
            prev_sot=prev_sot,
            no_speech=None if tokenizer is None else _special(tokenizer, "<|nospeech|>", "<|nocaptions|>"),
            multilingual=bool(getattr(g, "is_multilingual", False)),
            language_ids=dict(getattr(g, "lang_to_id", None) or {}),
            task_ids=dict(getattr(g, "task_to_id", None) or {}),
        )

    def language(self, value: str) -> str:
        """The code of one of this model's languages from a code or a name in any case ("German", "de"), the one
        resolver a given language goes through; ValueError for a language this model does not have."""
        code = CODE_OF_NAME.get(value.strip().lower(), value.strip().lower())
        if f"<|{code}|>" not in self.language_ids:
            raise ValueError(f"unknown language {value!r} for this model")
        return code

    def prompt(
        self, language: str | None, task: str = "transcribe", timestamps: bool = True, context: list[int] = ()
    ) -> list[int]:
        """The decoder's start: ``context`` (<|startofprev|> + text, or nothing), <|startoftranscript|>,
        language and task (multilingual models), <|notimestamps|> without timestamps."""
        ids = [*context, self.sot]
        if self.multilingual:
            ids += [self.language_ids[f"<|{language}|>"], self.task_ids[task]]
        if not timestamps:
            ids.append(self.no_timestamps)
        return ids


def _special(tokenizer, *names: str) -> int | None:
    for name in names:
        tid = tokenizer.convert_tokens_to_ids(name)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            return tid
    return None
