"""One piece through the Transcriber with word timings on: its voice, each segment's words and whether the coverage
check reads them, and what it decoded again. The diagnosed piece: 222.15-246.133 s of held-out default seed's quiet
guest (``make_speech_episodes --trim-above-noise 10``), run with ``PODSCRIBE_EXP_VBF16=1`` and the patch of
``../2026-12-07-bf16-values``.

    python piece.py /tmp/heldoutdef/real01_quiet_guest.mp3 222.15 246.133
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.abspath(__file__).rsplit("/bench/", 1)[0])  # this checkout's pipeline
# isort: off
import pipeline  # noqa: E402, F401  (before torch)
import numpy as np  # noqa: E402
from pipeline.audio import media  # noqa: E402
from pipeline.decode import DecodeOptions, Transcriber, recover  # noqa: E402
from pipeline.facts.runtime import pick_runtime  # noqa: E402
from pipeline.models.load import load_models  # noqa: E402
# isort: on

path, start_s, end_s = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
audio = media.decode(path)
piece = audio[int(start_s * media.SAMPLE_RATE) : int(end_s * media.SAMPLE_RATE)].astype(np.float32)
models = load_models("base", None, pick_runtime("cpu", "auto"), None)
(r,) = Transcriber(models, DecodeOptions(word_timestamps=True, language="en")).transcribe([piece])
print("voice", [(round(lo, 2), round(hi, 2)) for lo, hi in r.speech])
for s in r.segments:
    n = len(s.text.split())
    thin = recover.thin(s.start_s, s.end_s, n, r.speech, 1.0)
    voiced = recover.voiced(s.start_s, s.end_s, r.speech)
    print(f"{s.start_s:6.2f}-{s.end_s:6.2f} words {n} voiced {voiced:5.2f} thin {thin} | {s.text[:60]}")
    print("   first words:", [(round(w.start_s, 2), round(w.end_s, 2), w.word) for w in (s.words or [])][:3])
print("decoded again", [(d.start_s, d.end_s, d.reason) for d in r.redecodes])
