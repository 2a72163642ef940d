"""Kill recovery: SIGKILL `atlas crawl`'s whole process group at random moments, again and
again, then run one more `atlas crawl`, and count what was lost.

A sandbox web in its own process (4 origins x 30 pages, 10 pages per origin per cycle, a
0.15 s gap, so a cycle takes seconds and a crawl several cycles); each attempt is
`atlas crawl --cycles 3` in its own session, killed (the CLI, its code server, its runs and
their extraction workers together) after a random 2-15 s. After the last kill one more
`atlas crawl --cycles 3` runs to its end, and then one more cycle at a time (at most 4) for
as long as a reachable page waits for a cycle with room for it (how much of the web the
killed crawls got through varies with the moments of the kills). Then:

- lost: reachable pages missing from `documents` (committed in the store but never written
  to the lake is the failure this looks for), and documents without an `index_ready` event;
- duplicates: URLs with two documents, event ids seen twice;
- leased: URLs the store still holds leased;
- left behind: processes of a killed group still alive 5 s after its kill.

Target: all four 0.

    .venv/bin/python benchmarks/kill_recovery.py [--kills 10] [--seed 1]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

BIN = Path(sys.executable).parent
ORIGINS, PAGES, BUDGET, GAP_S = 4, 30, 10, 0.15
WAITING = ("discovered", "eligible", "failed_retryable")  # states of a page still to crawl
MAX_EXTRA_CYCLES = 4


@dataclass
class Result:
    kills: int
    reachable: int
    documents: int
    lost: int
    unindexed: int
    duplicate_documents: int
    duplicate_events: int
    leased: int
    left_behind: int
    final_exit: int
    extra_cycles: int = 0  # single cycles run after the last crawl while pages still waited
    cycles: list[str] = field(default_factory=list)
    kill_after_s: list[float] = field(default_factory=list)
    # each lost page as the store has it (url, state, reason, attempts, cycle queued in,
    # last status): a page never fetched reads differently from one committed and not written
    lost_as_stored: list[tuple[str, str, str, int, str | None, int | None]] = field(
        default_factory=list
    )


def _group_gone(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def run(workdir: Path, kills: int, seed: int) -> Result:
    import polars as pl
    import yaml

    from atlas_pipeline.config import load_config
    from atlas_pipeline.crawl import Engine
    from atlas_sandbox import SandboxWeb, normalize_url

    rng = random.Random(seed)
    serve = [str(BIN / "atlas"), "web", "--port", "0", "--seed", str(seed),
             "--origins", str(ORIGINS), "--pages", str(PAGES)]  # fmt: skip
    server = subprocess.Popen(serve, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert server.stdout is not None
        found = re.search(r"127\.0\.0\.1:(\d+)", server.stdout.readline())
        assert found, "the sandbox web did not start"
        port = int(found.group(1))
        web = SandboxWeb(seed=seed, generated_origins=ORIGINS, pages_per_origin=PAGES, port=port)
        cfg_path = workdir / "atlas.yaml"
        cfg_path.write_text(yaml.safe_dump({
            "seeds": web.seed_urls(), "data_dir": str(workdir), "shards": 2,
            "politeness": {"min_gap_s": GAP_S, "max_in_flight": 1},
            "scope": {"max_depth": 50, "max_pages_per_origin": BUDGET},
            "limits": {"total_timeout_s": 10, "batch_max_idle_s": 20},
            "resolve": {h: "127.0.0.1" for h in web.hosts}, "resolve_only": True,
        }))  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "ATLAS_FAILPOINTS"}
        env["DAGSTER_HOME"] = str(workdir / "dagster_home")
        crawl = [str(BIN / "atlas"), "crawl", "--config", str(cfg_path), "--cycles", "3"]
        left_behind = 0
        delays = []
        for _ in range(kills):
            proc = subprocess.Popen(crawl, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
            delay = round(rng.uniform(2.0, 15.0), 2)
            delays.append(delay)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(delay)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            left_behind += not _group_gone(proc.pid, 5.0)
        reachable = {normalize_url(u) for u in web.crawlable(50)}

        def stored() -> list[dict[str, Any]]:
            engine = Engine.from_config(load_config(cfg_path))
            try:
                return [r for s in range(2) for r in engine.store.url_rows(s)]
            finally:
                engine.close()

        final = subprocess.run(crawl, env=env, capture_output=True, text=True, timeout=900)
        extra_cycles = 0
        # The kills leave the last crawl more or less to do: a page its cycles' budgets had no
        # room for is still waiting, not lost. So the crawl goes on, a cycle at a time, while
        # a reachable page waits for one; a page lost stays lost however long it goes on.
        while (final.returncode == 0 and extra_cycles < MAX_EXTRA_CYCLES
               and any(r["url"] in reachable and r["state"] in WAITING for r in stored())):  # fmt: skip
            extra_cycles += 1
            final = subprocess.run([*crawl[:-1], "1"], env=env, capture_output=True, text=True,
                                   timeout=900)  # fmt: skip
        if final.returncode != 0:
            print(final.stdout[-2000:], final.stderr[-3000:], file=sys.stderr)
        lake = workdir / "lake" / "crawl"
        docs = pl.read_delta(str(lake / "documents"))
        ready = pl.read_delta(str(lake / "index_ready"))
        urls = set(docs["url"])
        rows = stored()
        states = Counter(r["state"] for r in rows)
        known = {r["url"]: r for r in rows}
        lost_as_stored = [
            (u, r["state"], r["reason"], r["attempts"], r["cycle"], r["last_status"])
            if (r := known.get(u))
            else (u, "not_in_store", "", 0, None, None)
            for u in sorted(reachable - urls)
        ]
        return Result(
            kills=kills,
            reachable=len(reachable),
            documents=docs.height,
            lost=len(reachable - urls),
            unindexed=len(urls - set(ready["url"])),
            duplicate_documents=docs.height - docs["url"].n_unique(),
            duplicate_events=ready.height - ready["event_id"].n_unique(),
            leased=states.get("leased", 0),
            left_behind=left_behind,
            final_exit=final.returncode,
            extra_cycles=extra_cycles,
            cycles=sorted(set(docs["crawl_cycle"])),
            kill_after_s=delays,
            lost_as_stored=lost_as_stored,
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="atlas-kill-") as tmp:
        started = time.time()
        result = run(Path(tmp), args.kills, args.seed)
    print(json.dumps(asdict(result), indent=1))
    bad = {k: v for k, v in asdict(result).items()
           if k in ("lost", "unindexed", "duplicate_documents", "duplicate_events", "leased",
                    "left_behind", "final_exit") and v}  # fmt: skip
    print(f"{result.kills} kills, {time.time() - started:.0f} s: "
          + ("nothing lost" if not bad else f"FAILED {bad}"))  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
