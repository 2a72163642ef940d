"""`atlas export-warc` (issue: WARC export, "Done when"): a two-cycle crawl of the changing-content
origins through the CLI, exported as WARC/1.1 and read back with warcio, matches the lake record
for record: responses with the stored bodies, revisits for 304s (server-not-modified) and for
unchanged 200s (identical-payload-digest) referring to records that exist, digests equal to an
independent SHA-1 of the stored body, request records equal to what the sandbox logged."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
import sys
import time
from base64 import b32encode
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import polars as pl
import pytest
from warcio.archiveiterator import ArchiveIterator

from atlas_pipeline import warc
from atlas_pipeline.bodies import BodyStore
from atlas_sandbox import changing
from tests.conftest import running_sandbox, sandbox_config, write_config

ATLAS = str(Path(sys.executable).parent / "atlas")
ROOT = Path(__file__).resolve().parents[2]
DOCS = "docs-b.example.test"  # its /redirect-me answers 301
DEAD = "dead.example.test"  # mapped to a loopback port nothing listens on: no response


def run_atlas(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ATLAS, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip


def sha1_b32(data: bytes) -> str:
    return "sha1:" + b32encode(hashlib.sha1(data).digest()).decode()


def read_warc(path: Path) -> list[dict[str, Any]]:
    """Every record of a file, read with warcio verifying the digests it can."""
    out = []
    with path.open("rb") as fh:
        for rec in ArchiveIterator(fh, check_digests=True):
            payload = rec.content_stream().read()
            out.append({
                "type": rec.rec_type, "headers": dict(rec.rec_headers.headers),
                "http": rec.http_headers, "payload": payload,
                "digest_ok": rec.digest_checker.passed,
                "problems": list(rec.digest_checker.problems),
            })  # fmt: skip
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("warc")
    with socket.socket() as probe:  # free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    with running_sandbox(tmp / "requests.jsonl", 0, 12, changing=True) as server:
        hosts = [*changing.CHANGING_HOSTS, DOCS, DEAD]
        cfg = sandbox_config(
            server, tmp / "data", shards=2,
            seeds=[*(f"http://{h}:{server.port}/" for h in changing.CHANGING_HOSTS),
                   f"http://{DOCS}:{server.port}/redirect-me", f"http://{DEAD}:{dead_port}/"],
            resolve={h: "127.0.0.1" for h in hosts},
            revisit_interval_s=0.5,  # every page is due again by the next cycle
            recrawl={"min_interval_s": 0.2, "jitter": 0.0, "untrusted_after": 7},
            limits={"max_attempts": 1, "batch_max_idle_s": 5},
        )  # fmt: skip
        cfg_path = write_config(tmp / "atlas.yaml", cfg)
        env = {**os.environ, "DAGSTER_HOME": str(tmp / "dagster_home")}
        logs = []
        for generation in (0, 1):
            if generation:
                time.sleep(0.6)  # past every first revisit interval
                server.bump_generation()
            server.log.clear()
            res = run_atlas("crawl", "--config", str(cfg_path), "--cycles", "1", env=env)
            assert res.returncode == 0, res.stderr[-3000:]
            logs.append(server.log.entries())
        out, again = tmp / "warc", tmp / "again"
        printed = {}
        for cycle in ("c0001", "c0002"):
            res = run_atlas("export-warc", "--config", str(cfg_path), "--cycle", cycle,
                            "--out", str(out), env=env)  # fmt: skip
            assert res.returncode == 0, res.stderr[-3000:]
            printed[cycle] = res.stdout
        res = run_atlas("export-warc", "--config", str(cfg_path), "--cycle", "c0002",
                        "--shard", "1", "--out", str(again), env=env)  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
        files = {(c, s): out / f"atlas-{c}-shard{s}.warc.gz" for c in ("c0001", "c0002")
                 for s in (0, 1)}  # fmt: skip
        yield {
            "server": server, "cfg": cfg_path, "env": env, "logs": logs, "printed": printed,
            "files": files, "again": again,
            "records": {k: read_warc(p) for k, p in files.items()},
            "fetches": pl.read_delta(str(tmp / "data" / "lake" / "crawl" / "fetches")),
            "bodies": BodyStore(tmp / "data" / "bodies"),
        }  # fmt: skip


def _by_fetch(records: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in records:
        if r["type"] != "warcinfo":
            fid = r["headers"]["WARC-Atlas-Fetch-ID"]
            out.setdefault(fid, {}).setdefault(r["type"], []).append(r)
    return out


def _date(value: datetime) -> str:
    """WARC/1.1 date (microseconds), computed here without the exporter."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")


def test_every_fetch_with_a_response_has_its_records_and_they_match_the_lake(
    exported: dict[str, Any],
) -> None:
    fetches, bodies = exported["fetches"], exported["bodies"]
    every = {r["headers"]["WARC-Record-ID"]: r for rs in exported["records"].values() for r in rs}
    seen = Counter[str]()
    for (cycle, shard), records in exported["records"].items():
        assert records[0]["type"] == "warcinfo"
        assert records[0]["headers"]["WARC-Filename"] == f"atlas-{cycle}-shard{shard}.warc.gz"
        rows = fetches.filter((pl.col("crawl_cycle") == cycle)
                              & (pl.col("origin_shard") == f"shard_{shard:03d}"))  # fmt: skip
        by_fetch = _by_fetch(records)
        answered = rows.filter(pl.col("status").is_not_null())
        assert set(by_fetch) == set(answered["fetch_id"].to_list())  # no body was swept
        for f in answered.iter_rows(named=True):
            got = by_fetch[f["fetch_id"]]
            assert sorted(got) in (["request", "response"], ["request", "revisit"]), got.keys()
            (main,) = got.get("response", []) + got.get("revisit", [])
            (request,) = got["request"]
            h = main["headers"]
            assert h["WARC-Target-URI"] == f["url"] == request["headers"]["WARC-Target-URI"]
            assert h["WARC-Date"] == _date(f["started_at"]) == request["headers"]["WARC-Date"]
            assert request["headers"]["WARC-Concurrent-To"] == h["WARC-Record-ID"]
            assert int(main["http"].get_statuscode()) == f["status"]
            assert main["http"].get_header("Location") == f["location"]
            assert main["http"].get_header("ETag") == f["etag"]
            assert main["digest_ok"] is not False and not main["problems"], main["problems"]
            if main["type"] == "response":
                seen["response"] += 1
                assert main["digest_ok"] is True  # warcio checked the block and payload digests
                if f["body_key"]:
                    body = bodies.get(f["body_key"])
                    assert main["payload"] == body
                    assert hashlib.sha256(main["payload"]).hexdigest() == f["body_key"]
                    assert h["WARC-Payload-Digest"] == sha1_b32(body)
                    assert main["http"].get_header("Content-Length") == str(len(body))
                else:  # robots.txt, redirects, errors: the store kept no body
                    assert main["payload"] == b""
                    assert ("WARC-Truncated" in h) == (f["bytes"] > 0)
                continue
            seen[h["WARC-Profile"]] += 1
            target = every[h["WARC-Refers-To"]]  # the record it refers to exists
            assert target["type"] == "response"
            assert target["headers"]["WARC-Target-URI"] == h["WARC-Refers-To-Target-URI"]
            assert target["headers"]["WARC-Date"] == h["WARC-Refers-To-Date"]
            assert target["headers"]["WARC-Payload-Digest"] == h["WARC-Payload-Digest"]
            assert sha1_b32(target["payload"]) == h["WARC-Payload-Digest"]
            earlier = fetches.filter((pl.col("url") == f["url"]) & (pl.col("status") == 200)
                                     & (pl.col("started_at") < f["started_at"])).sort("started_at")  # fmt: skip
            if f["status"] == 304:
                assert h["WARC-Profile"] == warc.NOT_MODIFIED
                assert sha1_b32(bodies.get(earlier["body_key"][-1])) == h["WARC-Payload-Digest"]
            else:
                assert h["WARC-Profile"] == warc.IDENTICAL_PAYLOAD
                assert f["body_key"] in earlier["body_key"].to_list()
                assert sha1_b32(bodies.get(f["body_key"])) == h["WARC-Payload-Digest"]
    # the second cycle: 304s from the honest origins, unchanged 200s from the misleading ones
    assert seen[warc.NOT_MODIFIED] >= 12 and seen[warc.IDENTICAL_PAYLOAD] >= 12, seen
    second = fetches.filter((pl.col("crawl_cycle") == "c0002") & (pl.col("kind") == "page"))
    misled = second.filter(pl.col("origin").str.contains(f"{changing.ETAG_CHURN}|{changing.NO_CONDITIONAL}"))  # fmt: skip
    assert set(misled["reason"].to_list()) == {"content_unchanged"}
    assert seen[warc.IDENTICAL_PAYLOAD] == misled.height
    assert fetches.filter(pl.col("status") == 301).height >= 1  # a redirect was archived


def test_request_records_hold_what_the_server_received(exported: dict[str, Any]) -> None:
    """Validators (rebuilt from earlier fetches), User-Agent and Accept-Encoding of every request
    record, against the sandbox's own log of the request."""
    checked = 0
    for cycle, log in zip(("c0001", "c0002"), exported["logs"], strict=True):
        received = {(e["host"], e["path"]): e["headers"] for e in log}
        for shard in (0, 1):
            for r in exported["records"][(cycle, shard)]:
                if r["type"] != "request":
                    continue
                url = urlsplit(r["headers"]["WARC-Target-URI"])
                sent = received[(url.hostname, url.path + (f"?{url.query}" if url.query else ""))]
                http = r["http"]
                assert http.protocol == "GET"
                assert http.get_header("Host") == url.netloc
                for name in ("user-agent", "if-none-match", "if-modified-since", "accept-encoding"):
                    assert http.get_header(name) == sent[name], (cycle, url, name)
                checked += 1
    assert checked == sum(len(log) for log in exported["logs"]) > 40


def test_the_printed_counts_match_the_files(exported: dict[str, Any]) -> None:
    fetches = exported["fetches"]
    for cycle, text in exported["printed"].items():
        lines = text.strip().splitlines()
        assert len(lines) == 2  # one per shard
        for shard, line in enumerate(lines):
            records = exported["records"][(cycle, shard)]
            types = Counter(r["type"] for r in records)
            shown = dict((k, int(n)) for n, k in re.findall(r"(\d+) (warcinfo|request|response|revisit)\b", line))  # fmt: skip
            assert shown == dict(types), line
            rows = fetches.filter((pl.col("crawl_cycle") == cycle)
                                  & (pl.col("origin_shard") == f"shard_{shard:03d}"))  # fmt: skip
            no_response = rows.filter(pl.col("status").is_null()).height
            assert f"skipped {no_response} without a response" in line
            assert str(exported["files"][(cycle, shard)]) in line
    dead = fetches.filter(pl.col("url").str.contains(DEAD))
    assert dead.height and dead["status"].null_count() == dead.height


def test_a_reexport_writes_the_same_bytes(exported: dict[str, Any]) -> None:
    again = exported["again"] / "atlas-c0002-shard1.warc.gz"
    assert again.read_bytes() == exported["files"][("c0002", 1)].read_bytes()
    assert sorted(p.name for p in exported["again"].iterdir()) == [again.name]  # no temp left


def test_an_unknown_cycle_or_shard_exits_2_naming_the_fix(exported: dict[str, Any]) -> None:
    cfg, env = str(exported["cfg"]), exported["env"]
    res = run_atlas("export-warc", "--config", cfg, "--cycle", "c0009", env=env)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip() == ("atlas: error: cycle c0009 has no fetches in the lake "
                                  "(cycles: c0001, c0002); pass one of those to --cycle")  # fmt: skip
    res = run_atlas("export-warc", "--config", cfg, "--cycle", "c0001", "--shard", "5", env=env)
    assert res.returncode == 2 and "(shards 0..1)" in res.stderr


def test_no_lake_exits_2_saying_crawl_first(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "atlas.yaml", {"seeds": ["http://a.example.test/"],
                                                 "data_dir": str(tmp_path)})  # fmt: skip
    res = run_atlas("export-warc", "--config", str(cfg), "--cycle", "c0001", env=dict(os.environ))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "no fetches in the lake" in res.stderr and "run atlas crawl first" in res.stderr


def test_the_warc_files_asset_writes_the_file_the_cli_writes(exported: dict[str, Any]) -> None:
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from assets.partitions import crawl_partitions, partition_key
    from assets.warc import build_warc_asset
    from resources.config import AtlasCrawl

    asset = build_warc_asset(crawl_partitions(2))
    # the fuller shard: which shard an origin hashes to depends on the sandbox's random port
    shard = max((0, 1), key=lambda s: len(exported["records"][("c0002", s)]))
    home = exported["env"]["DAGSTER_HOME"]
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(home)) as instance:
        result = dg.materialize([asset], instance=instance,
                                partition_key=str(partition_key("c0002", shard)),
                                resources={"atlas": AtlasCrawl(config_path=str(exported["cfg"]))})  # fmt: skip
    assert result.success
    (event,) = result.get_asset_materialization_events()
    meta = event.materialization.metadata
    path = Path(meta["path"].value)
    assert path == exported["cfg"].parent / "data" / "warc" / f"atlas-c0002-shard{shard}.warc.gz"
    assert path.read_bytes() == exported["files"][("c0002", shard)].read_bytes()
    types = Counter(r["type"] for r in exported["records"][("c0002", shard)])
    assert types["revisit"] > 0 and meta["records"].value == dict(types)
    assert meta["bytes"].value == path.stat().st_size


def test_a_body_retention_deleted_is_counted_not_a_crash(
    exported: dict[str, Any], tmp_path: Path
) -> None:
    """A copy of the body store without one page's body: that fetch is left out and counted,
    and a later fetch of the same bytes (which can only have been the same, deleted file) too."""
    import shutil

    from atlas_pipeline.config import load_config
    from atlas_pipeline.lake import Lake

    fetches = exported["fetches"]
    unchanged = fetches.filter((pl.col("crawl_cycle") == "c0002")
                               & (pl.col("reason") == "content_unchanged"))  # fmt: skip
    victim = unchanged.row(0, named=True)
    bodies = BodyStore(tmp_path / "bodies")
    shutil.copytree(exported["bodies"].root, bodies.root)
    Path(bodies.uri(victim["body_key"]).removeprefix("file://")).unlink()
    cfg = load_config(exported["cfg"])
    shard = int(victim["origin_shard"].removeprefix("shard_"))
    lake = Lake(cfg.lake_uri, cfg.lake_options)
    for cycle in ("c0001", "c0002"):
        written = warc.export_warc(lake, bodies, cfg.user_agent, cycle, shard, tmp_path)
        assert written.missing_bodies == 1, written.summary()
        assert "1 with their body gone from the store" in written.summary()
        ids = {r["headers"].get("WARC-Atlas-Fetch-ID") for r in read_warc(written.path)}
        gone = fetches.filter((pl.col("crawl_cycle") == cycle)
                              & (pl.col("body_key") == victim["body_key"]))  # fmt: skip
        assert gone.height == 1 and gone["fetch_id"][0] not in ids


FETCH = {"url": "http://a.example.test:8080/p?q=1", "kind": "page", "status": 200,
         "content_type": "text/html", "etag": '"v1"', "last_modified": None, "location": None,
         "conditional": True}  # fmt: skip


@pytest.mark.parametrize(("fetch", "length", "expected"), [
    (FETCH, 5, [("Content-Type", "text/html"), ("ETag", '"v1"'), ("Content-Length", "5")]),
    ({**FETCH, "status": 304, "content_type": None}, None, [("ETag", '"v1"')]),
    ({**FETCH, "status": 301, "etag": None, "content_type": None, "location": "/b"}, 0,
     [("Location", "/b"), ("Content-Length", "0")]),
    ({**FETCH, "last_modified": "Mon, 01 Jan 2024 00:00:00 GMT"}, 0,
     [("Content-Type", "text/html"), ("ETag", '"v1"'),
      ("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT"), ("Content-Length", "0")]),
])  # fmt: skip
def test_response_header_blocks_hold_what_the_lake_keeps(
    fetch: dict[str, Any], length: int | None, expected: list[tuple[str, str]]
) -> None:
    assert warc.response_headers(fetch, length) == expected


@pytest.mark.parametrize(("fetch", "validators", "extra"), [
    (FETCH, ('"v1"', "Mon"), [("If-None-Match", '"v1"'), ("If-Modified-Since", "Mon")]),
    (FETCH, (None, "Mon"), [("If-Modified-Since", "Mon")]),
    ({**FETCH, "conditional": False}, ('"v1"', "Mon"), []),  # an untrusted origin: none sent
])  # fmt: skip
def test_request_header_blocks_send_the_validators_of_conditional_fetches(
    fetch: dict[str, Any], validators: tuple[str | None, str | None],
    extra: list[tuple[str, str]],
) -> None:  # fmt: skip
    base = [("Host", "a.example.test:8080"), ("User-Agent", "AtlasBot/1"),
            ("Accept", warc.ACCEPT_PAGE), ("Accept-Encoding", "gzip, deflate")]  # fmt: skip
    assert warc.request_headers(fetch, "AtlasBot/1", validators) == base + extra


def test_small_pieces_of_a_record() -> None:
    robots = {**FETCH, "url": "https://a.example.test/robots.txt", "kind": "robots"}
    assert warc.request_headers(robots, "B", (None, None))[:3] == [
        ("Host", "a.example.test"), ("User-Agent", "B"), ("Accept", "*/*")]  # fmt: skip
    assert warc.request_target("http://a.example.test") == "/"
    assert warc.request_target(FETCH["url"]) == "/p?q=1"
    assert warc.status_line(304) == "304 Not Modified" and warc.status_line(599) == "599 Unknown"
    assert warc.record_id("f1") == warc.record_id("f1") != warc.record_id("f1", "request")
    assert re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", warc.record_id("f1"))
    when = datetime(2024, 1, 2, 3, 4, 5, 60, tzinfo=UTC)
    assert warc.warc_date(when) == "2024-01-02T03:04:05.000060Z"
    assert warc.sha1_digest(b"") == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"
    assert warc.file_name("c0001", 0) == "atlas-c0001-shard0.warc.gz"


def test_validators_are_the_latest_each_content_check_carried() -> None:
    """As the store's COALESCE(:etag, etag): a check without a validator keeps the older one;
    a 404 or a quarantined page is no content check."""

    def f(status: int, reason: str, etag: str | None, lm: str | None) -> dict[str, Any]:
        return {"status": status, "reason": reason, "etag": etag, "last_modified": lm}

    assert warc._validators([]) == (None, None)
    assert warc._validators([f(200, "fetched", "a", "L1"), f(304, "not_modified", None, None)]
                            ) == ("a", "L1")  # fmt: skip
    assert warc._validators([f(200, "fetched", "a", "L1"), f(200, "content_unchanged", "b", None),
                             f(404, "not_found", "c", "L3"), f(200, "parse_crashed", "d", "L4")]
                            ) == ("b", "L1")  # fmt: skip
