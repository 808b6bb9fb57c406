"""Progress bars of a run: audio seconds, shown as h:mm:ss, never past their total.

Bars count seconds of audio (floats) and show them as clock times: hours rounded to 0.001 h made a job of
many short files overshoot (each file's share rounded up, the total rounded once: 103-106% and a negative
ETA) and showed a short job as ``0.00/0.00 h``. An update never takes a bar past its total: the pieces of a
file can sum to a little more than its probed duration, and a file's share is what the job bar was given.
"""

from __future__ import annotations

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


def job_bar(total_s: float, enabled: bool, **extra) -> AudioBar:
    return AudioBar(
        **extra,
        total=total_s,
        desc="job",
        disable=not enabled,
        position=0,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {done}/{whole} of audio [{elapsed}<{remaining}]",
    )


def file_bar(name: str, total_s: float, enabled: bool, **extra) -> AudioBar:
    return AudioBar(
        **extra,
        total=total_s,
        desc=name[:40],
        leave=False,
        disable=not enabled,
        position=1,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {done}/{whole} [{remaining}]",
    )


def say(line: str, enabled: bool) -> None:
    """A line above the bars (a piece at its second chance): the bars are drawn again below it."""
    if enabled:
        tqdm.write(line)
