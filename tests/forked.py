"""Real CLI processes without paying for torch's and transformers' imports each time.

A `python -m pipeline.cli` process spends ~4-6 s of CPU importing torch and transformers before it reads an
argument, and the kill, signal and worker tests start dozens. Each test process keeps one server here: a Python
started like the CLI that has imported what a transcription imports (``PRELOAD``), has run nothing, and has one
Python thread. For each start it forks a child, which runs the CLI as `python -m pipeline.cli` would
(``runpy._run_module_as_main``, through tests/traced.py: with the tests' events object), with the start's
arguments, environment, folder, session and output files.

The child is a process of its own, as a fresh one would be: its pid, signals, locks, children and exit code.
What differs is only that those modules were imported before its environment was set; a start whose
environment differs from the server's in a variable read at import (``READ_AT_IMPORT``) gets a fresh interpreter
instead (``start`` decides). Processes the CLI spawns itself (workers, watched children, Ray actors) are fresh ones either
way: the product's own way of starting them is what those tests test.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

# The variables torch, its kernel libraries, transformers, CTranslate2 and onnxruntime read as they import (threads,
# kernels, devices, the hub's folders, the interpreter's own): a start whose environment differs from the server's in
# one of these gets a fresh interpreter. Others (podscribe's own, pytest's name of the running test, those libraries
# set as they import, oneDNN's cache sizes read at its first kernel) are only read later, in the child, which has them.
READ_AT_IMPORT = (
    "OMP_",
    "GOMP_",
    "KMP_",
    "MKL_",
    "OPENBLAS_",
    "ATEN_",
    "TORCH",
    "PYTORCH_",
    "CUDA_",
    "NVIDIA_",
    "TRANSFORMERS_",
    "HF_",
    "HUGGINGFACE_",
    "PYTHON",
    "LD_",
    "DNNL_",
    "CT2_",
    "ORT_",
)
# What every CLI run imports, imported once by the server: torch, transformers and Whisper's classes (most of it),
# then podscribe's modules of a transcription and the libraries they import as they run (Parquet, its pandas shim,
# the VAD's module; not onnxruntime, whose native state does not survive a fork: a forked child then aborts at exit,
# 'std::system_error: Invalid argument'). Only imports: nothing here opens a model or reads podscribe's variables.
# The one thread besides the server's is pyarrow's allocator's (jemalloc's background purger), which jemalloc's own
# fork handlers turn off in a child (it purges inline there). A module left out is imported by the child, as a fresh
# process would.
PRELOAD = (
    "import torch, transformers; from transformers import WhisperForConditionalGeneration, WhisperProcessor; "
    "import pipeline.cli.jobs, pipeline.job.run, pipeline.job.engines, pipeline.decode.transcriber, pipeline.outputs.export; "
    "import pyarrow.dataset, pyarrow.parquet, pandas, pipeline.audio.silero"
)


class Server:
    """The test process's side: one forking server, started on first use."""

    def __init__(self, cwd: Path):
        self.env = dict(os.environ)
        self.folder = Path(tempfile.mkdtemp(prefix="podscribe-forked-"))
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import forked; forked.serve()",
            ],
            cwd=cwd,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.count = 0
        atexit.register(shutil.rmtree, self.folder, True)  # its children's output and exit codes

    def same_imports(self, env: dict) -> bool:
        """Whether a child with ``env`` would have imported what the server did: no variable of ``READ_AT_IMPORT``
        differs. Else a fresh interpreter, and a warning in pytest's summary: a suite that stops forking gets
        slower, not wrong."""
        keys = set(env) | set(self.env)
        differ = sorted(k for k in keys if env.get(k) != self.env.get(k) and k.startswith(READ_AT_IMPORT))
        if differ:
            warnings.warn(
                f"a fresh interpreter for this start: {', '.join(differ)} differ from the forking server's",
                stacklevel=3,
            )
        return not differ

    def start(self, argv: list[str], env: dict, cwd: Path, session: bool) -> Forked:
        self.count += 1
        base = self.folder / str(self.count)
        request = {
            "argv": argv,
            "env": env,
            "cwd": str(cwd),
            "session": session,
            "stdout": f"{base}.out",
            "stderr": f"{base}.err",
            "status": f"{base}.status",
        }
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the forking server ended (exit code {self.proc.wait()}); see its stderr above")
        pid = int(answer)
        return Forked(pid, Path(request["stdout"]), Path(request["stderr"]), Path(request["status"]), argv)


class Forked:
    """A forked child seen as ``subprocess.Popen`` shows a process: ``pid``, ``poll``, ``wait``, ``communicate``,
    ``send_signal``, ``returncode``. The server reaps it and writes its exit code (-N: killed by signal N)."""

    def __init__(self, pid: int, stdout: Path, stderr: Path, status: Path, args: list[str]):
        self.pid, self.args, self.returncode = pid, args, None
        self._stdout, self._stderr, self._status = stdout, stderr, status

    def poll(self) -> int | None:
        if self.returncode is None and self._status.exists():
            self.returncode = int(self._status.read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.01)
        return self.returncode

    def stderr_so_far(self) -> str:
        """What the child wrote to stderr until now."""
        return self._stderr.read_text() if self._stderr.exists() else ""

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return self._stdout.read_text(), self._stderr.read_text()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # as Popen: never a signal to a pid that may have been reused
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


# -- the server's side -------------------------------------------------------------------------------------------


def serve() -> None:
    """Read one JSON request per line; fork a child for each, answer its pid; reap children and write each
    one's exit code to its status file. Ends when the test process closes the pipe."""
    exec(PRELOAD, {})
    gc.freeze()  # the preloaded objects out of the collector's reach: a child that collects does not copy their pages
    children: dict[int, str] = {}
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0.02)
        _reap(children)
        if not ready:
            continue
        line = sys.stdin.readline()
        if not line:
            return
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)  # runs the CLI and exits: never returns here
        children[pid] = request["status"]
        print(pid, flush=True)


def _reap(children: dict[int, str]) -> None:
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        path = children.pop(pid)
        Path(path + ".partial").write_text(str(os.waitstatus_to_exitcode(status)))
        os.rename(path + ".partial", path)


def _child(request: dict) -> None:
    import runpy

    if request["session"]:
        os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    os.close(null)
    sys.stdin = open(0, closefd=False)  # not the server's buffered reader of requests
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["-m", *request["argv"]]
    # The CLI ends as in a fresh process: through pipeline/cli/console.py's quick exit (threads joined, atexit
    # handlers, the exit code); an exception or an unhandled Ctrl-C through serve() to the interpreter's own end.
    runpy._run_module_as_main("traced")  # the CLI with the tests' events object (tests/traced.py)
    sys.exit(0)
