"""One worker of a job, by concern: what ``run`` composes.

- ``inputs``: the files, folders and globs a command names, as input paths;
- ``state``: the job read without writing (one value: rows, each content's state by the one rule, each input's
  content, damaged tables); ``plan``: from it, the tasks and the repairs the run applies under the lock (``status``
  and ``--dry-run`` render the same plan);
- ``config``: the options of a run, what of them decides the output, the policy for resuming older or other jobs;
- ``schedule``: which file next: claims, longest first, suspects last, one-piece files in one batch, lookahead;
- ``stream``: a file's pieces read in the background; ``onefile``: one file decoded, checkpointed, its row written;
- ``finish``: a file's outputs and speaker labels, a poisoned file's failed row, the job's outputs at the end;
- ``summary``: what a run did (one merge for every engine); what a run tells as it goes is ``facts/events.py``;
- ``run``: a worker's run, composed of the above;
- ``isolate``: a suspect file decoded alone in a child the worker watches; ``progress``: the bars and the Board;
- ``options``: every option once (the CLI's flags, the job file's keys, ``config``'s speed-only and added keys);
- ``engines``: how a job's workers start (processes, accelerate, Ray), each ending through ``finish`` and
  ``summary.JobSummary.of_launch``; ``stop``: the one stop policy of every process of a run;
- ``dryrun``: ``--dry-run``'s plan.

Nothing here imports torch when imported: the models are loaded by ``config.job_models`` when a job starts.
"""


class Interrupted(Exception):
    """The run was asked to stop (Ctrl-C, SIGTERM); everything decoded so far is persisted."""
