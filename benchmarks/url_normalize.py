"""Throughput of URL normalization (`atlas_pipeline.urls.normalize`) on realistic links.

Generates ~200k links as pages carry them (relative paths, root-relative, dot segments,
protocol-relative, query- and fragment-only, absolute links to mixed-case hosts with explicit
default ports, tracking parameters, percent-encodings, Unicode paths and hosts), each with the
URL of the page it was found on as base. Times `normalize(href, base)` on all of them and, on
the same inputs in the same run, `urllib.parse.urljoin(base, href)` alone (resolution without
any normalization), and prints both rates and their ratio. The caches in urls.py and egress.py
(authority, base, host) are cleared before every timed pass, so each pass starts cold.

    .venv/bin/python benchmarks/url_normalize.py             # 200k links, best of 5 passes
    .venv/bin/python benchmarks/url_normalize.py --links 50000 --repeat 3
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from collections.abc import Callable
from urllib.parse import urljoin

from atlas_pipeline import egress, urls
from atlas_pipeline.urls import BadUrl, normalize

WORDS = [
    "news",
    "Report",
    "chip-supply",
    "markets",
    "caf\u00e9",
    "\u00fcber",
    "Setup",
    "tag",
    "2024",
]
HOSTS = [f"news-{i}.example.test" for i in range(150)] + [
    "B\u00fccher.example",
    "stra\u00dfe.example",
    "Shop-A.Example.TEST",
    "docs.example.test",
]


def _link(rng: random.Random, page_host: str) -> str:
    """One href as a page would carry it, drawn by rough real-world frequency."""
    w = rng.choice(WORDS)
    k = rng.randrange(100_000)
    kind = rng.random()
    if kind < 0.25:
        return f"{w}-{k}.html"
    if kind < 0.45:
        return f"/{w}/{k}?sort=new&page={k % 7}" + ("&utm_source=feed" if k % 3 == 0 else "")
    if kind < 0.55:
        return f"../{w}/./{k}/../{k + 1}"
    if kind < 0.65:
        return f"https://{page_host}/a/{k}?id={k}#comments"
    if kind < 0.75:
        host = rng.choice(HOSTS)
        return f"HTTP://{host.upper()}:80/Item/{k}?color=Red&gclid=abc{k}&fbclid=x"
    if kind < 0.80:
        return f"//cdn.example.test/js/app.{k}.js"
    if kind < 0.85:
        return f"?page={k % 40}&q={w}"
    if kind < 0.88:
        return f"#section-{k}"
    if kind < 0.94:
        return f"/caf%c3%a9/%7e{w}/{k}%2Fx?q=a%26b%3dc+d"
    return f"/\u00fcber {w}/{k}?q=\u00e9t\u00e9&ref=home"


def make_links(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """`n` (href, base) pairs: pages of about 100 links each, on the hosts above."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    while len(out) < n:
        host = rng.choice(HOSTS)
        base = f"https://{host}/section/{rng.randrange(50)}/article-{rng.randrange(10_000)}.html"
        out.extend((_link(rng, host), base) for _ in range(min(100, n - len(out))))
    return out


def _clear_caches() -> None:
    urls._authority.cache_clear()
    urls._base_parts.cache_clear()
    egress.parse_host.cache_clear()


def _time(fn: Callable[[str, str], object], links: list[tuple[str, str]], repeat: int) -> float:
    """Best seconds of `repeat` cold passes over all links."""
    best = float("inf")
    for _ in range(repeat):
        _clear_caches()
        start = time.perf_counter()
        for href, base in links:
            fn(href, base)
        best = min(best, time.perf_counter() - start)
    return best


def _normalize(href: str, base: str) -> object:
    try:
        return normalize(href, base)
    except BadUrl:
        return None


def _urljoin(href: str, base: str) -> object:
    return urljoin(base, href)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--links", type=int, default=200_000, help="links to normalize (default 200k)")
    ap.add_argument("--repeat", type=int, default=5, help="timed passes; the best counts")
    args = ap.parse_args(argv)

    links = make_links(args.links)
    bad = sum(_normalize(h, b) is None for h, b in links)
    distinct = len({_normalize(h, b) for h, b in links})
    t_norm = _time(_normalize, links, args.repeat)
    t_join = _time(_urljoin, links, args.repeat)
    n = len(links)
    print(f"python {platform.python_version()} on {platform.machine()}, {n} links "
          f"({distinct} distinct canonical URLs, {bad} BadUrl), best of {args.repeat} cold passes")  # fmt: skip
    print(f"  normalize(href, base)  {n / t_norm:>10,.0f} URLs/s  ({t_norm * 1e6 / n:.2f} us/URL)")
    print(f"  urljoin(base, href)    {n / t_join:>10,.0f} URLs/s  ({t_join * 1e6 / n:.2f} us/URL)")
    print(f"  normalize / urljoin    {t_norm / t_join:.2f}x the time of resolution alone")


if __name__ == "__main__":
    main(sys.argv[1:])
