"""An operator pause mid-cycle (issue: operators and analysts, "Done when"): pausing an origin
while its batch runs stops its requests before the next one is due; other origins go on."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier
from atlas_pipeline.urls import origin_of
from tests.conftest import running_sandbox, sandbox_config

GAP_S = 0.5
PAUSED = "news-a.example.test"


def test_a_pause_mid_cycle_stops_the_origin_before_its_next_request(tmp_path: Path) -> None:
    with running_sandbox(tmp_path / "requests.jsonl", 1, 20) as server:
        cfg = config_from_mapping(sandbox_config(
            server, tmp_path / "data", shards=1,
            seeds=[server.url(h, "/") for h in (PAUSED, "docs-b.example.test")],
            politeness={"min_gap_s": GAP_S}, scope={"max_depth": 3},
        ), base_dir=tmp_path)  # fmt: skip
        engine = Engine.from_config(cfg)
        try:
            plan_frontier(engine, "c0001", 0)
            batch = threading.Thread(target=fetch_shard, args=(engine, "c0001", 0))
            batch.start()

            def requests_to(host: str) -> list[dict[str, object]]:
                return [e for e in server.log.entries(settle_s=0.0) if e["host"] == host]

            deadline = time.time() + 30
            while len(requests_to(PAUSED)) < 4 and time.time() < deadline:
                time.sleep(0.02)
            assert len(requests_to(PAUSED)) >= 4, "the origin never got going"
            origin = origin_of(server.url(PAUSED, "/"))
            engine.store.pause("origin", origin, "complaint #12", "ops", time.time())
            paused_at = time.time()
            batch.join(120)
            assert not batch.is_alive()
        finally:
            engine.close()
        entries = server.log.entries()
    mine = [e for e in entries if e["host"] == PAUSED]
    others = [e for e in entries if e["host"] == "docs-b.example.test"]
    # a request claimed just before the pause may still leave; none after its gap elapsed
    late = [e for e in mine if float(e["start"]) > paused_at + 0.05]  # type: ignore[arg-type]
    assert late == [], late
    assert any(float(e["start"]) > paused_at + GAP_S for e in others)  # type: ignore[arg-type]
    engine = Engine.from_config(cfg)
    try:  # the URLs it held back say why
        held = [r for r in engine.store.url_rows(0)
                if PAUSED in r["url"] and r["state"] == "eligible"]  # fmt: skip
    finally:
        engine.close()
    assert held and {r["reason"] for r in held} == {"operator_paused"}
