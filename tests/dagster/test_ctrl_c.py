"""A Ctrl-C that lands in a finalizer still stops a process waiting on runs.

Python drops an exception raised inside `__del__` ("Exception ignored in"); `atlas crawl`'s wait
loop goes through finalizers all the time. Once in CI a Ctrl-C never reached that loop (the
crawl waited its interrupted runs out and exited 1 instead of 130); a finalizer is the inferred
place. These tests raise a real SIGINT inside a real `__del__`, as the kernel's signal would."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.ctrl_c import CtrlC
from assets.launcher import Launcher, StopRequested
from atlas_pipeline.config import load_config
from tests.conftest import pythons_own_sigint


@pytest.fixture(autouse=True)
def _pythons_own_sigint_handler() -> Iterator[None]:
    """Python's own SIGINT handler, as a fresh `atlas crawl` has it (CtrlC takes only that
    one's place). An earlier test in the same worker process may have left another in place:
    in one CI run, with SIGINT ignored, none of these tests saw a KeyboardInterrupt at all."""
    with pythons_own_sigint():
        yield


class _CtrlCInFinalizer:
    def __del__(self) -> None:
        signal.raise_signal(signal.SIGINT)  # its handler runs here, inside __del__


def _ctrl_c_swallowed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Send SIGINT while a finalizer runs; what Python reported as dropped."""
    dropped: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", dropped.append)
    obj = _CtrlCInFinalizer()
    del obj
    return dropped


def test_a_ctrl_c_a_finalizer_swallows_is_raised_by_the_next_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with CtrlC() as ctrl_c:
        dropped = _ctrl_c_swallowed(monkeypatch)
        assert [type(d.exc_value) for d in dropped] == [KeyboardInterrupt]  # Python dropped it
        with pytest.raises(KeyboardInterrupt):
            ctrl_c.raise_pending()
        with pytest.raises(KeyboardInterrupt):  # until someone handles it
            ctrl_c.raise_pending()
        ctrl_c.handled()
        ctrl_c.raise_pending()  # handled: nothing left to raise
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_still_raises_where_it_lands_and_a_second_one_is_new() -> None:
    with CtrlC() as ctrl_c:
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        ctrl_c.handled()
        ctrl_c.raise_pending()
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        assert ctrl_c.pending


def test_an_embedding_programs_own_handler_is_left_alone() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with CtrlC() as ctrl_c:
            signal.raise_signal(signal.SIGINT)
            ctrl_c.raise_pending()
        assert seen == [signal.SIGINT] and not ctrl_c.pending
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_launchers_wait_stops_on_a_swallowed_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop `atlas crawl` waits in: the swallowed Ctrl-C comes out of it as a
    KeyboardInterrupt (not the stop its tick would raise two seconds later)."""
    cfg = load_config(None, {})
    ticks = iter([None, None, None, None, "stop"])  # one tick a poll (0.5 s): a stop after 2 s
    with dg.instance_for_test() as instance:
        launcher = Launcher(instance, tmp_path, cfg)
        with launcher.ctrl_c:
            dropped = _ctrl_c_swallowed(monkeypatch)
            assert [type(d.exc_value) for d in dropped] == [KeyboardInterrupt]
            run = instance.create_run_for_job(dg.GraphDefinition(name="never").to_job())
            with pytest.raises(KeyboardInterrupt):
                next(launcher.wait([run.run_id], tick=lambda: next(ticks)))
            launcher.ctrl_c.handled()
            with pytest.raises(StopRequested):  # handled: the wait goes on to its own stop
                next(launcher.wait([run.run_id], tick=lambda: next(ticks)))
