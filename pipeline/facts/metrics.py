"""Word error rate with Whisper's English normalizer (used by the tests and the benchmarks)."""

from __future__ import annotations


def english_normalizer():
    from whisper_normalizer.english import EnglishTextNormalizer

    return EnglishTextNormalizer()


def wer(references: list[str], hypotheses: list[str]) -> float:
    """Corpus WER over normalized texts (pairs whose reference normalizes to nothing are left out)."""
    import jiwer

    norm = english_normalizer()
    pairs = [(norm(r), norm(h)) for r, h in zip(references, hypotheses)]
    pairs = [(r, h) for r, h in pairs if r.strip()]
    return jiwer.wer([r for r, _ in pairs], [h for _, h in pairs])
