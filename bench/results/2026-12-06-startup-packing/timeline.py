import sys, time, runpy, threading, builtins, importlib
t0 = time.perf_counter()
log = []
def wrap(modname, attr):
    def install():
        m = importlib.import_module(modname)
        obj = m
        parts = attr.split(".")
        for p in parts[:-1]: obj = getattr(obj, p)
        f = getattr(obj, parts[-1])
        def w(*a, **k):
            s = time.perf_counter()
            try: return f(*a, **k)
            finally: log.append((s - t0, time.perf_counter() - t0, threading.current_thread().name, f"{modname}.{attr}"))
        setattr(obj, parts[-1], w)
    return install
# watch imports of heavy modules
orig_import = builtins.__import__
watch = {"torch", "pyarrow", "pandas", "faster_whisper", "onnxruntime", "tokenizers", "safetensors", "pyarrow.parquet", "numpy", "tqdm", "ffmpeg"}
seen = set()
def imp(name, *a, **k):
    if name in watch and name not in seen and name not in sys.modules:
        seen.add(name)
        s = time.perf_counter()
        r = orig_import(name, *a, **k)
        log.append((s - t0, time.perf_counter() - t0, threading.current_thread().name, "import " + name))
        return r
    return orig_import(name, *a, **k)
builtins.__import__ = imp
import concurrent.futures as cf
_r = cf.Future.result
def _res(self, *a, **k):
    s = time.perf_counter(); v = _r(self, *a, **k); d = time.perf_counter() - s
    if d > 0.002: log.append((s - t0, s - t0 + d, threading.current_thread().name, "wait future"))
    return v
cf.Future.result = _res
installs = [wrap(m, a) for m, a in [(x.split(":")[0], x.split(":")[1]) for x in sys.argv[1].split(",")]]
sys.argv = ["podscribe"] + sys.argv[2:]
import pipeline.job.run  # noqa
for i in installs:
    try: i()
    except Exception as e: print("no", e, file=sys.stderr)
try:
    runpy.run_module("podscribe", run_name="__main__")
except SystemExit:
    pass
finally:
    print(f"wall {time.perf_counter()-t0:.2f}", file=sys.stderr)
    for s, e, th, n in sorted(log): print(f"{s:6.2f} {e:6.2f} {e-s:5.2f} {th[:12]:12} {n}", file=sys.stderr)
