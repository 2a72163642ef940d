"""What rendering costs: CPU seconds per page, plain fetch + extraction against rendered in
headless Chromium, on the same pages; and the selective policy's total against render-all.

    .venv/bin/python benchmarks/render_cost.py [--repeat 3] [--plain-origins 5 --pages 20]

The pages are the sandbox's, served on loopback by an in-process SandboxServer: the script-
drawn shells and the plain origin of `--scripted`, and `--plain-origins` generated origins of
ordinary article pages. For every page, in the same run:

* plain: GET with aiohttp, then trafilatura's `extract` on the body (what a page costs
  Atlas's fetcher and parser, without the store);
* rendered: the same GET, then `RenderLane.render` (Debian's Chromium through Playwright,
  every subrequest answered by a loopback GET here) and `extract` on the rendered DOM.

CPU is this process's (`time.process_time`) plus every process below it (the Playwright
driver, Chromium's browser, renderer and utility processes: utime+stime of the live ones and
cutime+cstime of what they reaped, from /proc), measured around each contender's whole pass;
the best of `--repeat` passes counts. Words are trafilatura's on each side, so the table also
shows what rendering recovers. The selective total is the plain cost of every page plus the
rendered cost of the pages the render lane would render (a script element and fewer raw
words than `render.skip_above_words`), against rendering every page (seed 003 decision 12:
plain 20 ms, rendered 600 ms of CPU a page).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import time
from pathlib import Path

import trafilatura
from aiohttp import ClientSession

from atlas_pipeline.config import Render
from atlas_pipeline.render import LaneLimits, RenderLane, SubAnswer, SubRequest
from atlas_pipeline.render_step import has_script
from atlas_sandbox import SandboxServer, SandboxWeb, scripted

TICKS = os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(root: int) -> float:
    """CPU seconds of every process below `root` (not root itself): live ones' own time plus
    the time of children they reaped."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICKS
    below, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - below
        below |= frontier
    return sum(times[p] for p in below)


def _cpu() -> float:
    return time.process_time() + _tree_cpu_s(os.getpid())


def _words(text: str | None) -> int:
    return len(re.findall(r"\w+", text or ""))


async def _get(http: ClientSession, url: str, port: int) -> tuple[int, dict[str, str], bytes]:
    """A GET of a sandbox URL on loopback (the sandbox routes by Host)."""
    host = url.split("/")[2]
    local = url.replace(host, f"127.0.0.1:{port}", 1)
    async with http.get(local, headers={"Host": host}) as resp:
        return (
            resp.status,
            {"content-type": resp.headers.get("content-type", "")},
            await resp.read(),
        )


async def _plain(http: ClientSession, urls: list[str], port: int) -> dict[str, int]:
    out = {}
    for url in urls:
        _, _, body = await _get(http, url, port)
        out[url] = _words(trafilatura.extract(body.decode("utf-8", "replace"), url=url))
    return out


async def _rendered(http: ClientSession, lane: RenderLane, urls: list[str],
                    port: int) -> dict[str, int]:  # fmt: skip
    async def fetch(req: SubRequest) -> SubAnswer:
        if f":{port}/" not in req.url or "cdn-scripts" in req.url:  # refused, as Atlas would
            return SubAnswer("refused")
        status, headers, body = await _get(http, req.url, port)
        return SubAnswer("fetched", status, headers, body)

    out = {}
    for url in urls:
        _, headers, body = await _get(http, url, port)
        page = await lane.render(url, body, headers["content-type"] or "text/html", fetch)
        out[url] = _words(trafilatura.extract(page.html or "", url=url)) if page.html else -1
    return out


async def main(args: argparse.Namespace) -> None:
    web = SandboxWeb(seed=7, generated_origins=args.plain_origins, pages_per_origin=args.pages,
                     page_kb=(5, 40))  # fmt: skip
    with SandboxServer(web, port=0, scripted=True) as server:
        port = server.port
        shells = list(scripted.kinds(port))
        ordinary = web.page_urls()
        ordinary = ordinary[: args.plain_origins * args.pages]
        urls = shells + ordinary
        limits = LaneLimits(concurrency=1, navigation_timeout_s=6, settle_s=6.5,
                            page_timeout_s=20)  # fmt: skip
        best: dict[str, float] = {}
        words: dict[str, dict[str, int]] = {}
        bodies: dict[str, bytes] = {}
        async with ClientSession() as http, RenderLane(limits, "AtlasBot/1.0") as lane:
            assert lane.available, lane.unavailable_reason
            for url in urls:
                bodies[url] = (await _get(http, url, port))[2]
            await _rendered(http, lane, urls[:2], port)  # warm the browser and the caches
            for _ in range(args.repeat):
                for name, run in (("plain", lambda: _plain(http, urls, port)),
                                  ("rendered", lambda: _rendered(http, lane, urls, port))):  # fmt: skip
                    start = _cpu()
                    words[name] = await run()
                    best[name] = min(best.get(name, float("inf")), _cpu() - start)
    n = len(urls)
    plain_ms, rendered_ms = best["plain"] / n * 1000, best["rendered"] / n * 1000
    skip = Render().skip_above_words
    chosen = [u for u in urls if has_script(bodies[u]) and words["plain"][u] < skip]
    selective = best["plain"] + len(chosen) * best["rendered"] / n
    print(f"pages: {n} ({len(shells)} of the scripted sandbox, {len(ordinary)} ordinary)")
    print(f"{'':24}{'CPU ms/page':>12}{'words/page':>12}")
    for name, ms in (("plain fetch+extract", plain_ms), ("rendered", rendered_ms)):
        key = "plain" if name.startswith("plain") else "rendered"
        print(f"{name:24}{ms:12.1f}{sum(max(w, 0) for w in words[key].values()) / n:12.1f}")
    print(f"rendered / plain: {rendered_ms / plain_ms:.1f}x CPU a page")
    kinds = scripted.kinds(port)
    drawn = [u for u in shells if kinds[u] != "plain"]
    gained = sum(1 for u in drawn if words["rendered"][u] > words["plain"][u])
    print(f"script-drawn shells whose text only rendering recovers: {gained} of {len(drawn)}")
    print(
        f"selective (renders {len(chosen)} of {n}): {selective:.2f} CPU s; render-all: "
        f"{best['rendered']:.2f} CPU s; plain-only: {best['plain']:.2f} CPU s"
    )
    print(
        f"selective / render-all: {selective / best['rendered']:.2f}; "
        f"selective / plain-only: {selective / best['plain']:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--plain-origins", type=int, default=5)
    parser.add_argument("--pages", type=int, default=20)
    asyncio.run(main(parser.parse_args()))
