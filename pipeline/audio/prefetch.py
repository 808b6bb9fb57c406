"""Work ahead of the model: a bounded background iterator.

A file's pieces come from ffmpeg (decode, resample), the cutter and the VAD: a small share of the wall
time on a CPU, and a large one where the model runs on a GPU (docs/decisions/0021-bounded-prefetch.md).
Done in the loop, the model waits for all of it. ``ahead`` runs the producing iterator in a thread, at most
``depth`` items ahead of the consumer (ffmpeg and onnxruntime release the GIL, and so does torch), so
memory stays bounded: a batch in the model and at most one more in waiting.

The consumer sees exactly what it would see without the thread: the same items in the same order,
and an exception from the producer raised at the point it happened (after the items before it).
Closing the consumer early (a stop signal, an error in the model) stops the producer and closes its
iterator in its own thread, so ffmpeg is not left running.

The thread starts when ``ahead`` is called, not at the first item: the runner opens the files of the
next group while the model decodes the current one (``job.stream.Lookahead``), so a job of many short files
does not wait on ffmpeg between batches either.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator

_ITEM, _ERROR, _END = range(3)
_POLL_S = 0.1


def ahead(items: Iterable, depth: int) -> Ahead:
    """Iterate ``items`` in a background thread, at most ``depth`` (>= 1) items ahead. The thread starts at
    once (a file to come is read while the model is still at the one before); ``close()`` it when done."""
    return Ahead(items, depth)


class Ahead(Iterator):
    """The consumer's end of ``ahead``: an iterator with ``close()``, which stops the producer and waits for it."""

    def __init__(self, items: Iterable, depth: int):
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self._box: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._produce, args=(items,), name="podscribe-prefetch", daemon=True)
        self._thread.start()

    def _put(self, kind: int, value) -> bool:
        while not self._stop.is_set():
            try:
                self._box.put((kind, value), timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self, items: Iterable) -> None:
        source = iter(items)
        try:
            for item in source:
                if not self._put(_ITEM, item):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(_ERROR, exc)
            return
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()
        self._put(_END, None)

    def __next__(self):
        if self._done:
            raise StopIteration
        kind, value = self._box.get()
        if kind == _ITEM:
            return value
        self.close()
        if kind == _ERROR:
            raise value
        raise StopIteration

    def close(self) -> None:
        """Stop the producer (its iterator is closed in its own thread) and wait for it. Idempotent."""
        self._done = True
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def __del__(self) -> None:  # never closed (a bug elsewhere): at least let the thread end
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
