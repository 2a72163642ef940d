"""Ctrl-C in a process that waits on Dagster runs, raised where it lands and kept until handled.

Python runs a signal's handler wherever the main thread is at the next bytecode, and it drops
an exception raised inside a `__del__` method or a weakref callback ("Exception ignored in").
While `atlas crawl` waits on its runs the main thread goes through SQLAlchemy's and Dagster's
finalizers all the time. In one CI run a Ctrl-C vanished: the crawl reported its interrupted
runs as failed and exited 1 instead of 130, which only a KeyboardInterrupt that never reached
the wait loop explains. A finalizer is the inferred place; 31 tries here did not reproduce it,
and the CI of f46f3bf failed the same way with this in place, so it is not the only one. A
`CtrlC` raises KeyboardInterrupt as Python's own handler does and also keeps it pending until
the code that catches it calls `handled()`; the wait loop calls `raise_pending()` every poll, so
a Ctrl-C that a finalizer swallowed is raised there, half a second later at most.

What the CI failures were, found later: the test's pytest ran as a background job of a
script, so SIGINT was ignored (POSIX), and `atlas crawl`, started from it, inherited that:
it ignored the Ctrl-C (as a background job should; `CtrlC` leaves an ignored SIGINT alone),
while its runs, under a code server that sets its own handler, were interrupted. The test
now starts the crawl with SIGINT at its default, as a terminal does. A swallowed Ctrl-C
stays possible in principle, and this stays as the guard against it.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType


class CtrlC:
    """SIGINT's handler while a process waits on runs: the default behaviour, plus a memory."""

    def __init__(self) -> None:
        self.pending = False
        self._previous: object = None
        self._installed = False

    def __enter__(self) -> CtrlC:
        # Only in place of Python's own handler, and only where handlers can be set: an
        # embedding program's own handler (or a thread without signals) is left alone.
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._on_signal)
            self._installed = True
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]
            self._installed = False

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.pending = True
        raise KeyboardInterrupt

    def handled(self) -> None:
        """The caught KeyboardInterrupt is being acted on: a later Ctrl-C is a new one."""
        self.pending = False

    def raise_pending(self) -> None:
        """Raise a Ctrl-C that nobody has handled (one a finalizer swallowed)."""
        if self.pending:
            raise KeyboardInterrupt
