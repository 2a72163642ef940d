"""The `atlas` command: crawl (`crawl`), operator (`pause`, `resume`, `set-policy`, `optout`,
`retention`), maintenance (`config`, `sweep-bodies`, `reextract`, `inspect`, `stats`,
`report`, `export-warc`) and sandbox (`web`, `canary`, `indexer`, `demo`) commands, one module
each."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from atlas_pipeline.config import ENV_SET
from atlas_pipeline.errors import AtlasError

from .crawl import cmd_crawl
from .maintenance import (
    cmd_config,
    cmd_export_warc,
    cmd_inspect,
    cmd_reextract,
    cmd_stats,
    cmd_sweep_bodies,
)
from .operator import _operator_args, cmd_optout, cmd_pause, cmd_retention, cmd_set_policy
from .reports import cmd_report
from .sandbox import DEMO_CYCLES, cmd_canary, cmd_demo, cmd_indexer, cmd_web


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="atlas", description="Atlas: a polite, durable web crawler on Dagster."
    )
    sub = p.add_subparsers(dest="command", required=True)
    web = sub.add_parser("web", help="serve the sandbox web on loopback")
    web.add_argument("--port", type=int, default=8080)
    web.add_argument("--seed", type=int, default=7)
    web.add_argument(
        "--origins", type=int, default=5, help="generated origins besides the three publishers"
    )
    web.add_argument("--pages", type=int, default=40, help="pages per origin")
    web.add_argument("--page-kb", type=int, nargs=2, default=[20, 100], metavar=("LO", "HI"),
                     help="page size range in KB")  # fmt: skip
    web.add_argument("--log", help="JSON-lines request log file")
    web.add_argument("--lab", action="store_true",
                     help="politeness lab: site-001..006 misbehave (robots 503/404/301, 429, "
                          "slow, Crawl-delay); needs --origins 6 or more")  # fmt: skip
    web.add_argument("--hostile", action="store_true",
                     help="also serve the hostile origins (bombs., redirects., links.example.test):"
                          " gzip bomb, huge, drip, binary, SSRF redirects and links")  # fmt: skip
    web.add_argument("--canary-port", type=int,
                     help="port of the canary the hostile and scripted pages point at (with "
                          "--hostile or --scripted; default: the default port of "
                          "`atlas canary`)")  # fmt: skip
    web.add_argument("--traps", action="store_true",
                     help="also serve the trap origins (calendar., shop., feeds.example.test): "
                          "endless calendar and pagination, facets, session ids, tracking "
                          "parameters, URL spellings, base href, sitemap-only pages")  # fmt: skip
    web.add_argument("--trap-scale", type=int, metavar="N",
                     help="multiply every trap's extent by N (with --traps; default 1)")  # fmt: skip
    web.add_argument("--dupes", action="store_true",
                     help="also serve the duplicate-content origin (dupes.example.test): print "
                          "twins, near-duplicate live pages, corrected articles, canonical "
                          "claims")  # fmt: skip
    web.add_argument("--changing", action="store_true",
                     help="also serve the changing-content origins (rates., etag-churn., "
                          "no-conditional.example.test): pages changing every, every 4th or no "
                          "generation, ETags that change on every response, conditional headers "
                          "ignored; SIGUSR1 advances the generation")  # fmt: skip
    web.add_argument("--directives", action="store_true",
                     help="also serve the robots-directive origin (directives.example.test): "
                          "<meta name=robots|atlasbot> and X-Robots-Tag noindex / nofollow / "
                          "none, for us and for another bot; SIGUSR1 turns one page noindex")  # fmt: skip
    web.add_argument("--scripted", action="store_true",
                     help="also serve the script-drawn origins for the render lane "
                          "(scripted., cdn-scripts., plain-render.example.test): text drawn by "
                          "inline script or XHR, a slow and a never-loading page, SSRF XHRs, a "
                          "robots-disallowed script")  # fmt: skip
    web.set_defaults(func=cmd_web)
    canary = sub.add_parser("canary", help="record every hit on a loopback port (SSRF canary)")
    canary.add_argument(
        "--port",
        type=int,
        help="port (0: any free port; default: the port `atlas web --hostile` points at)",
    )
    canary.add_argument("--log", help="JSON-lines hit log file")
    canary.set_defaults(func=cmd_canary)
    indexer = sub.add_parser(
        "indexer", help="a test indexer on loopback: stores delivered events, counts duplicates"
    )
    indexer.add_argument(
        "--store", required=True, help="JSON-lines event store (read back on start)"
    )
    indexer.add_argument("--port", type=int,
                         help="port (0: any free port; default: 8090)")  # fmt: skip
    indexer.add_argument("--fail-after", type=int, metavar="N",
                         help="cut delivery after N accepted batches: every later POST /events "
                              "fails (see --fail-mode) until restart")  # fmt: skip
    indexer.add_argument("--fail-mode", choices=("503", "close"),
                         help="with --fail-after: '503' refuses the batch and stores nothing "
                              "(default); 'close' stores it, then drops the connection "
                              "unanswered")  # fmt: skip
    indexer.set_defaults(func=cmd_indexer)
    crawl = sub.add_parser("crawl", help="add cycle partitions and materialize them")
    crawl.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    crawl.add_argument("--cycles", type=int, default=1,
                       help="new cycles to add, after any an earlier crawl left unfinished")  # fmt: skip
    crawl.add_argument("--resume", action="store_true",
                       help="only finish what an earlier crawl left unfinished (--cycles 0)")  # fmt: skip
    crawl.add_argument(
        "--parallel", type=int, default=0, help="shard runs at once (default: all shards)"
    )
    crawl.add_argument("--max-pages", type=_positive(int), metavar="N",
                       help="stop once N fetches were committed (Ctrl-C's way: nothing lost)")  # fmt: skip
    crawl.add_argument("--max-seconds", type=_positive(float), metavar="S",
                       help="stop after S seconds")  # fmt: skip
    crawl.add_argument("--max-errors", type=_positive(int), metavar="N",
                       help="stop once N fetches failed (no response, or a 5xx)")  # fmt: skip
    _set_args(crawl)
    crawl.set_defaults(func=cmd_crawl)
    demo = sub.add_parser("demo", help="start the sandbox web and crawl it for 3 cycles")
    demo.add_argument("--data-dir", default="atlas_data/demo")
    demo.add_argument("--port", type=int, default=8080)
    demo.add_argument("--cycles", type=int, default=DEMO_CYCLES)
    demo.set_defaults(func=cmd_demo)
    stats = sub.add_parser(
        "stats", help="the crawl-db summary from the lake (like nutch readdb -stats)"
    )
    stats.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    stats.add_argument("--cycle", help="count this cycle's fetches and documents only")
    stats.add_argument("--json", action="store_true", help="as JSON")
    stats.set_defaults(func=cmd_stats)
    report = sub.add_parser(
        "report", help="write the crawl-wide HTML report of every cycle and their index page"
    )
    report.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    report.add_argument("--cycle", help="only this cycle's page (the index always)")
    report.set_defaults(func=cmd_report)
    config = sub.add_parser("config", help="validate a crawl config and print every key")
    config.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    _set_args(config)
    config.set_defaults(func=cmd_config)
    sweep = sub.add_parser(
        "sweep-bodies", help="delete stored bodies that no committed fetch references"
    )
    sweep.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    sweep.add_argument(
        "--grace-hours", type=float, default=24.0, help="keep bodies put more recently than this"
    )
    sweep.set_defaults(func=cmd_sweep_bodies)
    again = sub.add_parser(
        "reextract", help="rebuild documents from stored bodies (no request goes out)"
    )
    again.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    again.add_argument("--cycle", required=True, help="the crawl cycle, e.g. c0001")
    again.add_argument("--shard", type=int, help="one shard (default: every shard)")
    again.set_defaults(func=cmd_reextract)
    warc = sub.add_parser(
        "export-warc", help="write a cycle's fetches as WARC/1.1 files (one per shard)"
    )
    warc.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    warc.add_argument("--cycle", required=True, help="the crawl cycle, e.g. c0001")
    warc.add_argument("--shard", type=int, help="one shard (default: every shard)")
    warc.add_argument("--out", metavar="DIR", help="output folder (default <data_dir>/warc)")
    warc.set_defaults(func=cmd_export_warc)
    for name, text in (("pause", "stop crawling an origin or registrable domain"),
                       ("resume", "lift a pause")):  # fmt: skip
        cmd = sub.add_parser(name, help=text)
        _operator_args(cmd)
        cmd.add_argument("--reason", required=True, help="why (kept in the audit log)")
        cmd.set_defaults(func=cmd_pause)
    optout = sub.add_parser(
        "optout", help="suppress an origin, domain or URL prefix and purge its data (audited)"
    )
    _operator_args(optout, prefix=True)
    optout.add_argument("--reason", required=True, help="the request (kept in the audit log)")
    optout.add_argument("--verified-by", required=True,
                        help="how the request was verified, e.g. 'DNS TXT record, ticket 42'")  # fmt: skip
    optout.set_defaults(func=cmd_optout)
    policy = sub.add_parser(
        "set-policy", help="rate limits, priority or revisit bounds of an origin or domain"
    )
    _operator_args(policy)
    policy.add_argument("--min-gap-s", type=float, help="floor on seconds between requests")
    policy.add_argument("--max-in-flight", type=float, help="concurrent requests at most")
    policy.add_argument("--priority", type=float, help="0..1, for its URLs now and later")
    policy.add_argument("--revisit-min-s", type=float, help="shortest revisit interval")
    policy.add_argument("--revisit-max-s", type=float, help="longest revisit interval")
    policy.add_argument("--unset", action="append", metavar="KEY",
                        help="remove a setting (repeatable), e.g. --unset priority")  # fmt: skip
    policy.add_argument("--reason", required=True, help="why (kept in the audit log)")
    policy.set_defaults(func=cmd_set_policy)
    retention = sub.add_parser(
        "retention", help="apply retention per data class now (the retention_job does it daily)"
    )
    retention.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    retention.add_argument("--who", help="operator name (default $USER)")
    retention.set_defaults(func=cmd_retention)
    inspect = sub.add_parser(
        "inspect", help="explain a URL: discovery, state, fetches, robots, documents, events"
    )
    inspect.add_argument("url", help="the URL, in any spelling (it is normalized)")
    inspect.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    inspect.add_argument("--json", action="store_true", help="print JSON instead of text")
    inspect.add_argument("--limit", type=int, default=20,
                         help="rows of a long list shown in the text report (default 20)")  # fmt: skip
    inspect.set_defaults(func=cmd_inspect)
    return p


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
        return value

    return parse


def _set_args(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("-s", "--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override one config key for this run, validated like the file "
                          "(repeatable), e.g. -s politeness.min_gap_s=2")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if getattr(args, "set", None):
            # in the environment, so the code location and every run it starts load the
            # same overridden config
            os.environ[ENV_SET] = json.dumps(args.set)
        return int(args.func(args))
    except AtlasError as exc:
        print(f"atlas: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
