"""pipeline/audio/prefetch.py: the background iterator the runner reads a file's pieces through."""

from __future__ import annotations

import threading
import time

import pytest

from pipeline.audio.prefetch import ahead


class Source:
    """A generator that records how far it was pulled, whether it was closed, and in which thread."""

    def __init__(self, n: int, fail_at: int | None = None):
        self.n, self.fail_at = n, fail_at
        self.pulled = 0
        self.closed = False
        self.threads: set[str] = set()

    def __iter__(self):
        try:
            for i in range(self.n):
                self.threads.add(threading.current_thread().name)
                if i == self.fail_at:
                    raise ValueError(f"bad item {i}")
                self.pulled = i + 1
                yield i
        finally:
            self.closed = True


def _settle(source: Source, at_least: int) -> None:
    deadline = time.monotonic() + 5
    while source.pulled < at_least and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # give an unbounded producer time to run further


def test_items_arrive_in_order_from_another_thread():
    source = Source(50)
    assert list(ahead(source, depth=3)) == list(range(50))
    assert source.closed
    assert source.threads == {"podscribe-prefetch"}


def test_the_producer_stays_at_most_depth_items_ahead():
    source = Source(100)
    it = ahead(source, depth=4)
    assert next(it) == 0
    _settle(source, 5)
    # one handed out, `depth` in the queue, one more made and waiting for room
    assert source.pulled <= 1 + 4 + 1
    assert next(it) == 1
    _settle(source, 6)
    assert source.pulled <= 2 + 4 + 1
    it.close()


def test_an_error_reaches_the_consumer_after_the_items_before_it():
    source = Source(10, fail_at=6)
    got = []
    with pytest.raises(ValueError, match="bad item 6"):
        for item in ahead(source, depth=2):
            got.append(item)
    assert got == [0, 1, 2, 3, 4, 5]


def test_closing_early_stops_the_producer_and_closes_its_source():
    source = Source(10_000)
    it = ahead(source, depth=2)
    assert [next(it), next(it)] == [0, 1]
    it.close()  # joins the producer thread
    assert source.closed
    assert source.pulled < 10
    assert not any(t.name == "podscribe-prefetch" for t in threading.enumerate())


def test_depth_must_be_positive():
    with pytest.raises(ValueError):
        next(ahead([1], depth=0))


def test_reading_starts_before_the_first_item_is_asked_for_and_closes_unread():
    """The runner opens the next files while the model is at the current one: the producer must be at work
    before the consumer's first ``next``, and closing a stream nobody read stops it all the same."""
    source = Source(10_000)
    it = ahead(source, depth=3)
    _settle(source, 4)
    assert 1 <= source.pulled <= 3 + 1
    it.close()
    assert source.closed
    assert not any(t.name == "podscribe-prefetch" for t in threading.enumerate())
    with pytest.raises(StopIteration):
        next(it)
