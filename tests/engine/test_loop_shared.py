"""LoopShared: things (extraction workers) handed between event loops in several threads."""

from __future__ import annotations

import asyncio
import threading

import pytest

from atlas_pipeline.loop_shared import Closed, LoopShared


def test_a_free_item_is_taken_at_once_and_given_back() -> None:
    shared: LoopShared[str] = LoopShared(lambda item: None)
    shared.give("a")

    async def go() -> str:
        item = await shared.take()
        shared.give(item)
        return item

    assert asyncio.run(go()) == "a"
    assert asyncio.run(go()) == "a"


def test_an_item_given_back_goes_to_the_longest_waiter_on_its_own_loop() -> None:
    shared: LoopShared[str] = LoopShared(lambda item: None)
    got: dict[str, tuple[str, int]] = {}
    registered = {n: threading.Event() for n in ("first", "second")}

    def waiter(name: str) -> None:
        async def go() -> None:
            task = asyncio.ensure_future(shared.take())
            await asyncio.sleep(0)  # the task has asked and waits
            registered[name].set()
            got[name] = (await task, threading.get_ident())

        asyncio.run(go())

    threads = {n: threading.Thread(target=waiter, args=(n,)) for n in ("first", "second")}
    threads["first"].start()
    assert registered["first"].wait(5)
    threads["second"].start()
    assert registered["second"].wait(5)
    shared.give("x")  # from this thread, to the loop of the first waiter
    threads["first"].join(5)
    assert got["first"] == ("x", threads["first"].ident)
    assert "second" not in got
    shared.give("y")
    threads["second"].join(5)
    assert got["second"] == ("y", threads["second"].ident)


def test_a_cancelled_waiter_is_passed_over() -> None:
    shared: LoopShared[str] = LoopShared(lambda item: None)

    async def go() -> str:
        gone = asyncio.ensure_future(shared.take())
        wanted = asyncio.ensure_future(shared.take())
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.sleep(0)
        shared.give("x")
        return await asyncio.wait_for(wanted, 5)

    assert asyncio.run(go()) == "x"


def test_an_item_handed_to_a_waiter_cancelled_meanwhile_goes_on_to_the_next() -> None:
    shared: LoopShared[str] = LoopShared(lambda item: None)

    async def go() -> str:
        first = asyncio.ensure_future(shared.take())
        await asyncio.sleep(0)
        shared.give("x")  # the first's future has its result ...
        first.cancel()  # ... but its task is cancelled before it runs again
        with pytest.raises(asyncio.CancelledError):
            await first
        return await asyncio.wait_for(shared.take(), 5)

    assert asyncio.run(go()) == "x"


def test_once_closed_waiters_are_cancelled_takes_fail_and_givebacks_are_retired() -> None:
    retired: list[str] = []
    shared: LoopShared[str] = LoopShared(retired.append)
    shared.give("free")

    async def go() -> None:
        item = await shared.take()
        waiter = asyncio.ensure_future(shared.take())
        await asyncio.sleep(0)
        assert shared.close() == []  # the only item is out
        with pytest.raises(asyncio.CancelledError):
            await waiter
        with pytest.raises(Closed):
            await shared.take()
        shared.give(item)

    asyncio.run(go())
    assert retired == ["free"]
