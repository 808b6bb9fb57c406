"""podscribe command line: transcribe, run (job files), status, export, search, site, models list|import, distill.

``group.py`` the command group and whisper's spellings; ``flags.py`` the click options, generated from the option
table (``pipeline/job/options.py``); ``settings.py`` defaults, job file and flags merged, checked and made into the
option objects; ``jobs.py`` transcribe and run; ``tools.py`` status, export, models;
``browse.py`` search and site (pipeline/browse/); ``jobfile.py`` job files; ``validate.py`` the range and choice
checks; ``status.py`` and ``job_report.py`` what ``podscribe status`` reads and shows; ``console.py`` the command as
a process (its quick exit).
"""

from . import browse, jobs, tools  # noqa: F401 (they attach their commands to the group)
from .console import console
from .group import main

__all__ = ["console", "main"]
