"""Errors a user sees, each with its own exit code, so cron and systemd can tell them apart.

Bad *input files* are not errors of the job: they become failed rows and the job
goes on. These are the reasons a whole run stops (README, "Exit codes").
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_NO_INPUT_SUCCEEDED = 1
EXIT_USAGE = 2  # click's own code for bad arguments
EXIT_LOCKED = 3
EXIT_CONFIG_CHANGED = 4
EXIT_DAMAGED_STATE = 5
EXIT_STORAGE = 6
EXIT_SIGHUP = 129  # 128 + SIGHUP: the terminal went away (an ssh session closed)
EXIT_SIGINT = 130  # 128 + SIGINT, what shells report for Ctrl-C
EXIT_SIGTERM = 143  # 128 + SIGTERM


class PodscribeError(Exception):
    """A user-facing error: its message is the whole story (no traceback)."""

    exit_code = 1


class UsageProblem(PodscribeError):
    """An argument that cannot work (a model that does not exist, an out dir under a file, ...)."""

    exit_code = EXIT_USAGE


class JobLocked(PodscribeError):
    """Another runner holds the job directory."""

    exit_code = EXIT_LOCKED


class ConfigChanged(PodscribeError):
    """The job directory was made with another configuration; ``changes``: (dotted path, its value then, now)."""

    exit_code = EXIT_CONFIG_CHANGED

    def __init__(self, message: str, changes: tuple[tuple[str, object, object], ...] = ()):
        super().__init__(message)
        self.changes = changes


class DamagedState(PodscribeError):
    """The job directory holds something podscribe cannot read and will not guess about."""

    exit_code = EXIT_DAMAGED_STATE


class StorageError(PodscribeError):
    """Writing into the job directory failed (disk full, permissions): the run stops, nothing is lost."""

    exit_code = EXIT_STORAGE
