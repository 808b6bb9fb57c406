"""`podscribe site`: a static site of an archive's transcripts, built from its job dirs' manifests.

A new site is built in a temporary folder beside its place, synced, and renamed into place, so a folder of that
name is a whole site or none. A site rebuilt (more episodes done, relabelled, renamed speakers) is changed in
place, one file at a time (each written whole: temp file and rename), and only where something changed: an
episode whose row, segments table, names, audio link and downloads are as they were is not rendered again (the
state of each is kept in ``.podscribe/site.json``), and a file whose new bytes equal the old is not written.
Episode pages and search files are written before the index that links to them. Builds of one site take turns
(an OS lock), so the workers of a job can each build it as their files finish. Many episodes to render are
shared among worker processes, one per core.

Every file of the site is podscribe's output as in ``outputs/ownership.py``: a page or download a person changed after
podscribe wrote it is never replaced (the new version goes beside it as ``NAME.new.EXT``, and the build says
so), nor removed when its episode leaves the site. An episode's downloads (SRT, VTT, TXT, JSON) are the job's own
files where the job wrote them, a person's edits included (a TXT corrected by hand beside the job is the one the
site offers, marked as edited); where the job wrote none, they are made from the manifest (export.py's writers:
the costly part of a first build, ~0.6 s of CPU per hour of audio).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from ...facts.errors import StorageError, UsageProblem
from ...outputs.record import RECORD_DIR
from ...storage.atomic import read_json_dict, try_flock
from ...storage.manifest import is_job
from ..archive import (
    SITE_RECORD,
    NotAJob,
    open_archive,
    what_it_is,
)
from ..sites import remember
from .builder import Builder, SiteOptions, SiteResult

log = logging.getLogger("podscribe")


def check_out(out: Path) -> bool:
    """Whether ``out`` is a site already (False: a new one is made there). A file, a folder of other things or a
    folder that cannot be written: UsageProblem, before anything is read or written."""
    if out.exists() and not out.is_dir():
        raise UsageProblem(f"-o {out}: a file is there, not a folder")
    if out.is_dir():
        if (out / RECORD_DIR / SITE_RECORD).is_file():
            if not os.access(out, os.W_OK | os.X_OK):
                raise UsageProblem(f"-o {out}: the site's folder cannot be written (permissions)")
            return True
        try:
            entries = sorted(p.name for p in out.iterdir())
        except OSError as exc:
            raise UsageProblem(f"-o {out}: cannot be read ({exc.strerror or exc})") from exc
        if entries:
            raise UsageProblem(
                f"-o {out}: the folder holds other files ({', '.join(entries[:3])}{', ...' * (len(entries) > 3)}) "
                "and is no site podscribe built; give a new or empty folder"
            )
    parent = next((p for p in out.parents if p.exists()), None)
    if parent is None or not parent.is_dir():
        raise UsageProblem(f"-o {out}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageProblem(f"-o {out}: {parent} cannot be written (permissions)")
    return False


def build_site(job_dirs: list[Path], options: SiteOptions) -> SiteResult:
    """Build or update the site at ``options.out`` from ``job_dirs``. A folder that is no job: NotAJob (exit 2);
    an episode whose tables cannot be read is listed unreadable (``result.unreadable``) and the rest is built."""
    start = time.monotonic()
    out = Path(os.path.abspath(options.out))
    exists = check_out(out)
    if not job_dirs and not (options.add_jobs and exists):
        raise UsageProblem("name at least one job dir")
    for root in job_dirs:  # a folder that is no job: refused before anything is made
        if not is_job(Path(os.path.abspath(root))):
            raise NotAJob(f"{root} {what_it_is(Path(os.path.abspath(root)))}")
    if not exists:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
        try:
            result = _build(staging, out, job_dirs, options, {}, durable=False)
            os.chmod(staging, 0o777 & ~_umask())
            os.sync()  # every file on disk before the folder is renamed into place (one sync, not one per file)
            os.rename(staging, out)  # the site appears whole, or not at all
            staging = None
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not (out / RECORD_DIR / SITE_RECORD).is_file():
                raise StorageError(f"cannot build the site in {out}: {exc.strerror or exc}") from exc
            exists = True  # another build made it meanwhile: update that one
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
    if exists:
        with _locked(out):
            record = read_json_dict(out / RECORD_DIR / SITE_RECORD)
            result = _build(out, out, job_dirs, options, record, durable=True)
    for job in [Path(j) for j in read_json_dict(out / RECORD_DIR / SITE_RECORD).get("jobs", [])]:
        if not remember(job, out):
            log.info("%s cannot be written: `podscribe search` links to this site with --site %s", job, out)
    result.wall_s = time.monotonic() - start
    return result


def _build(
    target: Path, final: Path, job_dirs: list[Path], options: SiteOptions, record: dict, durable: bool
) -> SiteResult:
    jobs = [Path(os.path.abspath(j)) for j in job_dirs]
    if options.add_jobs:
        earlier = [Path(os.path.abspath(j)) for j in record.get("jobs", []) if isinstance(j, str) and is_job(Path(j))]
        jobs = list(dict.fromkeys([*earlier, *jobs]))
    archive = open_archive(jobs, options.speaker_names, text=False)
    return Builder(target, final, archive, options, record, durable).run()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _locked(out: Path):
    fd = os.open(out / RECORD_DIR / "build.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        while not try_flock(fd):
            time.sleep(0.05)
        yield
    finally:
        os.close(fd)


__all__ = ["SiteOptions", "SiteResult", "build_site", "check_out"]
