"""The job runner: inputs → audio → decode → stitch → manifest, one file at a time per worker.

The runner is the package ``pipeline/job/``, one module per concern (its docstring maps them); this module
keeps the names the CLI, the engines, the isolated child, the benchmarks and the tests import.

Built to survive the night:
- a run is a worker: it plans under the job's preparation lock (one at a time), then decodes
  without any job-wide lock, claiming one file at a time (workers.py); a second run of the same
  job with the same configuration joins as another worker, on this machine or another one that
  sees the job dir; one with another configuration is refused, the difference named;
- files are decoded longest first, so one long episode does not run alone at the end of the night;
- files of one piece (clips, trailers) are decoded several to a batch (cross-file batches): a piece's
  tokens do not depend on the rows beside it, so grouping changes speed only;
- each decoded batch of pieces is persisted atomically before the next one
  starts, so a killed run resumes inside a half-done file, and a finished
  file is consolidated into its tables;
- a process that dies on a file only makes it a suspect (a whole run killed is no evidence): it is decoded
  last, alone, in a watched child process, and fails only when that child dies again at the same place
  while its worker lives (isolate.py);
- rerunning skips inputs already done (and failed ones, unless asked to retry);
  a changed configuration is refused unless the job is restarted;
- an input is its content (a SHA-256 of every byte): copies at several paths are
  decoded once and keep every path; a path that cannot be read on a rerun (an
  unmounted share) keeps its finished results and is reported missing;
- a file that fails becomes a failed row with a readable error; the job goes on;
- a table or checkpoint that cannot be read is moved aside or dropped and its
  input decoded again; a write that fails (disk full) stops the run cleanly;
- the first Ctrl-C, SIGTERM or SIGHUP finishes the batch in hand, persists it and stops
  cleanly, also between files (one that comes while the model loads: before the job dir is made).
"""

from __future__ import annotations

from .job import Interrupted
from .job.config import ADDED, LABELS, SPEED_ONLY, JobOptions, job_config, job_models, output_hash
from .job.inputs import AUDIO_EXTENSIONS, InputRef, expand_inputs
from .job.onefile import FileContext, transcribe_file
from .job.run import alone_worker, restart_job, run, stopped_yet
from .job.state import Task
from .job.summary import JobSummary

__all__ = [
    "ADDED",
    "AUDIO_EXTENSIONS",
    "LABELS",
    "SPEED_ONLY",
    "FileContext",
    "InputRef",
    "Interrupted",
    "JobOptions",
    "JobSummary",
    "Task",
    "alone_worker",
    "expand_inputs",
    "job_config",
    "job_models",
    "output_hash",
    "restart_job",
    "run",
    "stopped_yet",
    "transcribe_file",
]
