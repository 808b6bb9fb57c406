"""Row-by-row differences of two runs in this folder: python diff.py 59-base 59-final"""

import difflib
import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).parent


def rows(name):
    return json.loads(gzip.open(HERE / f"{name}.json.gz").read())["configurations"]["podscribe base"]["episodes"]


a, b = rows(sys.argv[1]), rows(sys.argv[2])
for ep in a:
    ra = [f"{r['start']:7.2f} {r['end']:7.2f} {r['text']}" for r in a[ep]["rows"]]
    rb = [f"{r['start']:7.2f} {r['end']:7.2f} {r['text']}" for r in b[ep]["rows"]]
    d = [x for x in difflib.unified_diff(ra, rb, lineterm="", n=0) if not x.startswith(("---", "+++"))]
    print("==", ep, len(ra), "->", len(rb))
    print("\n".join(d))
