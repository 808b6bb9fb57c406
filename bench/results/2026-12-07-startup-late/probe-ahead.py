"""Experiment: the first input probed (and optionally decoded) on a thread from the process start."""
import os, runpy, sys, threading
from pathlib import Path
sys.path.insert(0, "/work/main")
mode = os.environ.get("EARLY", "probe")
import pipeline.audio.media as media
path = Path(sys.argv[2]).absolute()
memo = {}
orig_probe = media.probe
def early():
    memo["info"] = orig_probe(path)
t = threading.Thread(target=early, daemon=True); t.start()
def probe(p):
    if Path(p).absolute() == path:
        t.join(); return memo["info"]
    return orig_probe(p)
media.probe = probe
sys.argv = ["podscribe", *sys.argv[1:]]
runpy.run_module("pipeline.cli", run_name="__main__")
