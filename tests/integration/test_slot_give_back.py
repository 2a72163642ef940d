"""Finished requests' origin slots go back with the next claim, or on their own once they have
waited defaults.GIVE_BACK_WINDOW_S: never a transaction per finished request."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from atlas_pipeline import defaults as d
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier
from tests.conftest import SandboxProcess, sandbox_config


def test_finished_slots_wait_a_window_for_a_claim_to_carry_them(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    # one extraction worker: its parse backlog, not the network, limits the claims, which is
    # when the loop has finished slots and no claim to carry them
    cfg = config_from_mapping(
        sandbox_config(sandbox, tmp_path, shards=1, extraction_workers=1,
                       politeness={"max_in_flight": 2, "global_concurrency": 64}),
        base_dir=tmp_path,
    )  # fmt: skip
    engine = Engine.from_config(cfg)
    returned: list[list[Any]] = []
    release_slots = engine.store.release_slots

    def spy(finished):  # type: ignore[no-untyped-def]
        returned.append(list(finished))
        return release_slots(finished)

    engine.store.release_slots = spy  # type: ignore[method-assign]
    plan_frontier(engine, "c0001", 0)
    result = fetch_shard(engine, "c0001", 0)
    stats = result.stats
    assert stats.requests >= 60  # the session sandbox: 5 origins x 15 pages, all of them
    assert stats.slot_returns == len(returned) >= 1
    # Each give-back of its own empties the list, and the next may only come once the oldest
    # slot finished after it has waited the window: at most one a window over the batch. A
    # give-back at every turn of the loop made one for every request or two.
    assert stats.slot_returns <= stats.elapsed_s / d.GIVE_BACK_WINDOW_S + 1
    assert stats.slot_returns < stats.requests / 4
    # and every slot went back all the same: nothing holds an origin after the batch
    with sqlite3.connect(engine.store.path) as db:  # type: ignore[attr-defined]
        assert db.execute("SELECT COUNT(*) FROM urls WHERE slot_held = 1").fetchone() == (0,)
    engine.close()
