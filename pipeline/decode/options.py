"""Decoding options: a plain dataclass with no heavy imports, so the CLI can build and check it
before torch and transformers load (bad arguments answer at once)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DecodeOptions:
    """How pieces are decoded.

    ``initial_prompt`` and ``hotwords``: text the decoder sees as "previous text" before every piece
    (podscribe decodes pieces independently, so a prompt conditions each of them, not only the
    first as in openai-whisper's long-form loop): names, terms and spellings the model should
    prefer. The tokens before each piece are

        <|startofprev|> [" " + hotwords.strip()] [" " + initial_prompt.strip()] <|startoftranscript|><|lang|><|task|>

    — for a prompt alone exactly transformers' ``generate(prompt_ids=processor.get_prompt_ids(text))``;
    hotwords as in faster-whisper (``get_prompt``): they go into the same previous-text slot, before
    the initial prompt when both are given. At most 223 text tokens (Whisper's n_ctx // 2 - 1, as
    openai-whisper and faster-whisper cut): hotwords keep their first 223, the initial prompt the last
    ones of what room is left (faster-whisper cuts each part to 223 separately, and ignores hotwords
    when a ``prefix`` is given; podscribe has no prefix). Both are stored stripped; blank text is no
    prompt (None). A prompt costs decoder time: every step attends over its tokens too, and they
    take room from the 448 positions a pass may use.
    """

    language: str | None = None  # None: detect per piece (multilingual models)
    task: str = "transcribe"  # or "translate"
    batch_size: int | None = None  # None: by the model (``default_batch_size``)
    silence_db: float = -50.0  # pieces quieter than this (RMS, dBFS) are silence
    no_speech_threshold: float = 0.6
    logprob_threshold: float = -1.0
    compression_ratio_threshold: float = 2.4  # above: the text loops (Whisper's own limit)
    vad: bool = True  # Silero VAD: skip pieces without a voice, drop segments outside speech
    word_timestamps: bool = False  # words with start/end/probability (alignment heads + DTW)
    min_voice_s: float = 0.3
    vad_threshold: float = 0.4  # Silero's speech probability; lenient: speech over a music bed must still count
    initial_prompt: str | None = None  # previous-text prompt before every piece (see the class docstring)
    hotwords: str | None = None  # names/terms as a prompt, before initial_prompt (faster-whisper's hotwords)
    languages: tuple[str, ...] | None = None  # detection restricted to these codes (None: any)
    language_mode: str = "piece"  # "piece": detected per piece; "file": detected on the first speech, then locked
    coverage: bool = True  # voice the text does not cover (>= coverage_gap_s) is decoded again (decode/recover.py)
    coverage_gap_s: float = 1.0
    fallback_beams: int = 5  # pieces failing Whisper's checks are decoded again with this many beams (0: never)

    def __post_init__(self):
        if self.task not in ("transcribe", "translate"):
            raise ValueError(f"task must be 'transcribe' or 'translate', not {self.task!r}")
        if self.batch_size is not None and not 1 <= self.batch_size <= 64:
            raise ValueError(f"batch size must be 1..64, got {self.batch_size}")
        if not 0 <= self.fallback_beams <= 16:
            raise ValueError(f"fallback beams must be 0..16, got {self.fallback_beams}")
        if self.coverage_gap_s <= 0:
            raise ValueError(f"coverage gap must be > 0 s, got {self.coverage_gap_s}")
        if self.language_mode not in ("piece", "file"):
            raise ValueError(f"language mode must be 'piece' or 'file', not {self.language_mode!r}")
        if self.languages is not None:
            object.__setattr__(self, "languages", tuple(self.languages) or None)
        for name in ("initial_prompt", "hotwords"):  # stripped, blank is None: one spelling per prompt (config hash)
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be text, not {type(value).__name__}")
            if value is not None:
                object.__setattr__(self, name, value.strip() or None)


# The decoding loop's rows when ``--batch-size`` is not given: 16 where the batch's cross-attention keys and values
# (every row's, read at every step) take at most ``CROSS_KEYS_BUDGET_MB`` (tiny, base, distil-large's two decoder
# layers), else 8 (small and up, whose 16 rows would hold 1.8-7.9 GB). A step's fixed cost (the weights, the
# dispatch) is shared by more rows, and a file of 9-16 pieces is one loop instead of two (decision 0059).
WIDE_BATCH, NARROW_BATCH = 16, 8
CROSS_KEYS_BUDGET_MB = 640


def default_batch_size(cross_bytes_a_row: int) -> int:
    """The batch size for a model whose cross-attention keys and values take ``cross_bytes_a_row`` a row."""
    return WIDE_BATCH if WIDE_BATCH * cross_bytes_a_row <= CROSS_KEYS_BUDGET_MB * 2**20 else NARROW_BATCH
