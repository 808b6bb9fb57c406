"""Progress bars of a run: audio seconds, shown as h:mm:ss, never past their total.

Bars count seconds of audio (floats) and show them as clock times: hours rounded to 0.001 h made a job of
many short files overshoot (each file's share rounded up, the total rounded once: 103-106% and a negative
ETA) and showed a short job as ``0.00/0.00 h``. An update never takes a bar past its total: the pieces of a
file can sum to a little more than its probed duration, and a file's share is what the job bar was given.

One renderer for every engine: a worker that is not the one drawing (a `--workers N` child, a Ray actor)
``forward``s its bars as events instead of drawing them, and the process that owns the terminal feeds the
events of all its workers (its own too) to one ``Board``, which draws them with the same bars: the job bar
over every worker's finished files and a bar per worker for the file it is at. A worker's code is the same
either way (``job_bar``, ``file_bar``, ``say``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tqdm import tqdm


def clock(seconds: float) -> str:
    """h:mm:ss of a number of seconds (whole seconds, never negative)."""
    s = max(0, int(round(seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class AudioBar(tqdm):
    """A tqdm bar over seconds of audio: ``{done}``/``{left}``/``{whole}`` in bar_format are h:mm:ss."""

    @property
    def format_dict(self):
        d = super().format_dict
        total = d.get("total") or 0.0
        d["done"], d["whole"] = clock(d["n"]), clock(total)
        return d

    def advance(self, seconds: float) -> None:
        """Add ``seconds``, up to the total."""
        room = (self.total or 0.0) - self.n
        step = min(max(0.0, seconds), max(0.0, room))
        if step > 0:
            self.update(step)


Event = tuple  # (kind, source, *values): what a forwarded bar sends (Board.handle draws it)
_forward: tuple[Callable[[Event], None], int] | None = None  # (send, source) while this process forwards


def forward(send: Callable[[Event], None] | None, source: int = 0) -> None:
    """From now on this process's bars and lines are events given to ``send`` (None: drawn here again)."""
    global _forward
    _forward = None if send is None else (send, source)


class _Sent:
    """A bar of a forwarding worker: its updates are events for the Board that draws them."""

    def __init__(self, kind: str, *values):
        self.send, self.source = _forward
        self.kind = kind
        self.send((kind, self.source, *values))

    def advance(self, seconds: float) -> None:
        self.send((f"{self.kind}_advance", self.source, float(seconds)))

    def close(self) -> None:
        if self.kind == "file":
            self.send(("file_close", self.source))

    def __enter__(self):
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def job_bar(total_s: float, enabled: bool, **extra) -> AudioBar:
    if enabled and _forward is not None:
        return _Sent("job", float(total_s))
    return _job_bar(total_s, enabled, **extra)


def file_bar(name: str, total_s: float, enabled: bool, **extra) -> AudioBar:
    if enabled and _forward is not None:
        return _Sent("file", name, float(total_s))
    return _file_bar(name, total_s, enabled, **extra)


def _job_bar(total_s: float, enabled: bool, position: int = 0, **extra) -> AudioBar:
    return AudioBar(
        **extra,
        total=total_s,
        desc="job",
        disable=not enabled,
        position=position,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {done}/{whole} of audio [{elapsed}<{remaining}]",
    )


def _file_bar(name: str, total_s: float, enabled: bool, position: int = 1, **extra) -> AudioBar:
    return AudioBar(
        **extra,
        total=total_s,
        desc=name[:40],
        leave=False,
        disable=not enabled,
        position=position,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {done}/{whole} [{remaining}]",
    )


def say(line: str, enabled: bool, file=None) -> None:
    """A line above the bars (a piece at its second chance): the bars are drawn again below it. ``file``:
    where it goes when this process draws (tqdm's default is stdout)."""
    if enabled and _forward is not None:
        send, source = _forward
        send(("say", source, line))
    elif enabled:
        tqdm.write(line, file=file)


class Board:
    """Draws the events of every worker of a run (``forward``) with the bars above: one job bar, whose total is
    the largest plan a worker reported (every worker plans the files left of the same job) and which advances by
    the files each worker finished (each file is finished by one), and a file bar per worker. Thread-safe: the
    drawing process's own worker and a thread reading the others' events both feed it."""

    def __init__(self, enabled: bool = True, **extra):
        self.enabled, self.extra = enabled, extra
        self.lock = threading.Lock()
        self.job: AudioBar | None = None
        self.planned: dict[int, float] = {}
        self.files: dict[int, AudioBar] = {}
        self.slots: dict[int, int] = {}  # source -> the line of its file bar
        self.closed = False

    def handle(self, event: Event) -> None:
        kind, source, *values = event
        with self.lock:
            if not self.closed:  # a stopped run's last events are not drawn under its last words
                getattr(self, f"_{kind}")(source, *values)

    def _job(self, source: int, total_s: float) -> None:
        self.planned[source] = max(self.planned.get(source, 0.0), total_s)
        total = max(self.planned.values())
        if self.job is None:
            self.job = _job_bar(total, self.enabled, **self.extra)
        elif total > (self.job.total or 0.0):
            self.job.total = total
            self.job.refresh()

    def _job_advance(self, _source: int, seconds: float) -> None:
        if self.job is not None:
            self.job.advance(seconds)

    def _file(self, source: int, name: str, total_s: float) -> None:
        self._file_close(source)
        line = self.slots.setdefault(source, 1 + len(self.slots))
        self.files[source] = _file_bar(name, total_s, self.enabled, position=line, **self.extra)

    def _file_advance(self, source: int, seconds: float) -> None:
        if source in self.files:
            self.files[source].advance(seconds)

    def _file_close(self, source: int) -> None:
        bar = self.files.pop(source, None)
        if bar is not None:
            bar.close()

    def _say(self, _source: int, line: str) -> None:
        if self.enabled:
            tqdm.write(line, file=self.extra.get("file"))

    def short(self) -> bool:
        """Whether the job bar is drawn and short of its total (by more than the rounding of its sums)."""
        with self.lock:
            return self.job is not None and not self.closed and self.job.n < (self.job.total or 0.0) - 1e-6

    def complete(self) -> None:
        """Every worker has ended and the job dir holds nothing left of the run's plan: the job bar at its total.
        Events tell a bar what changed, and a worker killed after its file's row was written but before it told
        the Board (a Ray actor restarted, a `--workers` child whose file the last pass finds done) never sends
        that file's seconds: its bar would end short of a finished job."""
        with self.lock:
            if self.job is not None and not self.closed:
                self.job.advance((self.job.total or 0.0) - self.job.n)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            for source in list(self.files):
                self._file_close(source)
            if self.job is not None:
                self.job.close()
