"""Things a process's event loops take turns with (extraction workers), shared by loops
that run in several threads.

A loop waiting for one awaits a future of its own; whoever gives one back hands it to the
longest waiter on that waiter's loop (`call_soon_threadsafe`, or at once on the same loop),
so no thread has to sit between the loops and the things they share.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Closed(Exception):
    """Taken from a LoopShared that has closed."""


class LoopShared(Generic[T]):
    """The items free to take, shared by the event loops of a process: an item given back
    goes to the longest waiter, on that waiter's loop. `retire` is what becomes of an item
    given back once this has closed."""

    def __init__(self, retire: Callable[[T], None]) -> None:
        self._retire = retire
        self._lock = threading.Lock()
        self._free: deque[T] = deque()
        self._waiting: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[T]]] = deque()
        self.closed = False

    async def take(self) -> T:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.closed:
                raise Closed("closed: nothing more to take")
            if self._free:
                return self._free.popleft()
            waiter: asyncio.Future[T] = loop.create_future()
            self._waiting.append((loop, waiter))
        try:
            return await waiter
        except asyncio.CancelledError:
            with self._lock, contextlib.suppress(ValueError):
                self._waiting.remove((loop, waiter))
            if waiter.done() and not waiter.cancelled():  # handed over as this was cancelled
                self.give(waiter.result())
            raise

    def give(self, item: T) -> None:
        """Back to the longest waiter, or to the free ones; retired once this has closed."""
        while True:
            with self._lock:
                closed = self.closed
                if not closed and not self._waiting:
                    self._free.append(item)
                    return
                if not closed:
                    loop, waiter = self._waiting.popleft()
            if closed:
                self._retire(item)
                return
            if self._hand(loop, waiter, item):
                return

    def _hand(self, loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[T], item: T) -> bool:
        """Give `item` to `waiter` in its loop; False when that waiter is gone."""
        if waiter.done():
            return False
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            waiter.set_result(item)
            return True
        try:
            loop.call_soon_threadsafe(self._settle, waiter, item)
        except RuntimeError:  # its loop has closed
            return False
        return True

    def _settle(self, waiter: asyncio.Future[T], item: T) -> None:
        if waiter.done():  # cancelled since it was handed the item: the next one's
            self.give(item)
        else:
            waiter.set_result(item)

    def close(self) -> list[T]:
        """No more takes; waiters are cancelled. The items that were free."""
        with self._lock:
            self.closed = True
            free, self._free = list(self._free), deque()
            waiting, self._waiting = list(self._waiting), deque()
        for loop, waiter in waiting:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(waiter.cancel)
        return free
