"""A stream consumed on a thread of its own while the caller's thread goes on making it.

A lake write is two kinds of work in turn: Python that builds the next chunk of rows into
Arrow (store reads, dicts, texts read back from the body store, all holding the GIL) and
pyarrow's Parquet encoder and compressor, which let the GIL go. Done one after the other on
one thread, the second core idles through both; with this chunk encoded on another thread
while the next is built, they overlap.

The consumer, not the producer, moves: the producer is the caller's row source, which may
read the coordination store through this thread's own connection; the consumer touches
nothing but the files it writes.

At most `depth` items wait between the two, so memory stays bounded by the chunk. Either
side's error ends both: a producer error reaches the consumer as `Abandoned` (so it can
remove what it wrote) and is then raised to the caller; a consumer error stops the producer
at its next item and is raised to the caller.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar, cast

T = TypeVar("T")
R = TypeVar("R")

_POLL_S = 0.1  # how often one side, held at the queue, checks that the other is still there


class Abandoned(Exception):
    """Raised inside the consumer when the producer failed: clean up and let it go."""


class _Done:
    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def write_behind(
    consume: Callable[[Iterator[T]], R],
    items: Iterable[T],
    depth: int = 2,
    name: str = "write-behind",
) -> R:
    """`consume(stream)` run on a new thread, the stream being `items` as this thread makes
    them; returns what `consume` returns."""
    if depth < 1:
        raise ValueError(f"write_behind depth must be at least 1, not {depth}")
    box: queue.Queue[T | _Done] = queue.Queue(maxsize=depth)
    result: R | None = None
    error: BaseException | None = None  # the consumer's
    finished = threading.Event()

    def stream() -> Iterator[T]:
        while True:
            item = box.get()
            if isinstance(item, _Done):
                if item.error is not None:
                    raise Abandoned(f"the producer failed: {item.error!r}") from item.error
                return
            yield item

    def run() -> None:
        nonlocal result, error
        try:
            result = consume(stream())
        except BaseException as exc:  # the caller's to raise
            error = exc
        finished.set()

    def hand_over(item: T | _Done) -> bool:
        """False once the consumer has ended (it takes no more)."""
        while not finished.is_set():
            try:
                box.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    failure: BaseException | None = None
    try:
        for item in items:
            if not hand_over(item):
                break  # the consumer ended early: its error (or result) says why
    except BaseException as exc:
        failure = exc
    hand_over(_Done(failure))
    worker.join()
    if failure is not None:
        raise failure
    if error is not None:
        raise error
    return cast(R, result)  # consume returned (it may return None)
