"""Work ahead of the model: a bounded background iterator.

A file's pieces come from ffmpeg (decode, resample), the cutter and the VAD: about 5% of the wall
time of a long episode on a 2-core CPU, and half of it or more where the model runs on a GPU. Done in
the loop, the model waits for all of it. ``ahead`` runs the producing iterator in a thread, at most
``depth`` items ahead of the consumer (ffmpeg and onnxruntime release the GIL, and so does torch), so
memory stays bounded: a batch in the model and at most one more in waiting.

The consumer sees exactly what it would see without the thread: the same items in the same order,
and an exception from the producer raised at the point it happened (after the items before it).
Closing the consumer early (a stop signal, an error in the model) stops the producer and closes its
iterator in its own thread, so ffmpeg is not left running.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator

_ITEM, _ERROR, _END = range(3)
_POLL_S = 0.1


def ahead(items: Iterable, depth: int) -> Iterator:
    """Iterate ``items`` in a background thread, at most ``depth`` (>= 1) items ahead."""
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    box: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(kind: int, value) -> bool:
        while not stop.is_set():
            try:
                box.put((kind, value), timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        source = iter(items)
        try:
            for item in source:
                if not put(_ITEM, item):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            put(_ERROR, exc)
            return
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()
        put(_END, None)

    thread = threading.Thread(target=produce, name="podscribe-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = box.get()
            if kind == _END:
                return
            if kind == _ERROR:
                raise value
            yield value
    finally:
        stop.set()
        thread.join()
