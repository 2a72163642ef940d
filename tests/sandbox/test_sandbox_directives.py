"""The sandbox's robots-directive origin (sandbox/directives.py): what each page sends agrees
with its ground truth, read with the engine's own parser and directive rules."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path

import pytest

from atlas_pipeline.directives import Directives, meta_names, page_directives
from atlas_pipeline.parsing import parse_page
from atlas_sandbox import SandboxServer, SandboxWeb
from atlas_sandbox import directives as site
from tests.conftest import running_sandbox

TOKEN = "AtlasBot"


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxWeb(seed=7, generated_origins=0), directives=True) as srv:
        yield srv


def get(port: int, path: str, host: str = site.HOST) -> tuple[int, list[str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{port}"})
        resp = conn.getresponse()
        return resp.status, resp.headers.get_all("X-Robots-Tag") or [], resp.read()
    finally:
        conn.close()


def decided(port: int, path: str) -> Directives:
    status, headers, body = get(port, path)
    assert status == 200, path
    meta = parse_page(body, f"http://{site.HOST}/", None, False, meta_names(TOKEN))["meta"]
    return page_directives(headers, meta, TOKEN)


def test_every_page_says_what_its_ground_truth_says(server: SandboxServer) -> None:
    assert len(site.pages()) == len(site.PAGES) == 10
    for path in site.pages():
        assert decided(server.port, path) == Directives(*site.says(path)), path
        assert decided(server.port, site.target(path)) == Directives(), path
    assert decided(server.port, "/") == Directives()


def test_each_page_links_to_its_own_target_only(server: SandboxServer) -> None:
    targets = set()
    for path in site.pages():
        _, _, body = get(server.port, path)
        links = parse_page(body, "http://x/", None, False)["links"]
        assert [href for href, _, _ in links] == [site.target(path)], path
        targets.add(site.target(path))
    assert len(targets) == len(site.pages())
    _, _, index = get(server.port, "/")
    assert [h for h, _, _ in parse_page(index, "http://x/", None, False)["links"]] == site.pages()


def test_several_headers_are_sent_as_several(server: SandboxServer) -> None:
    assert get(server.port, "/directives/header-several")[1] == ["otherbot: nofollow",
                                                                 "noindex, all"]  # fmt: skip
    assert get(server.port, "/directives/header-otherbot-noindex")[1] == ["otherbot: noindex"]


def test_ground_truth_helpers() -> None:
    assert "/directives/header-otherbot-noindex" in site.indexed(0)
    assert "/directives/meta-noindex" not in site.indexed(0)
    assert f"/directives/{site.TURNS}" in site.indexed(0) - site.indexed(1)
    assert site.followed(0) == {site.target(p) for p in site.pages()} - {
        "/targets/meta-nofollow", "/targets/meta-atlasbot-none",
        "/targets/header-atlasbot-nofollow"}  # fmt: skip
    with pytest.raises(KeyError):
        site.target("/directives/nope")


def test_a_generation_turns_the_delivered_page_noindex() -> None:
    with SandboxServer(SandboxWeb(seed=7, generated_origins=0), directives=True) as srv:
        path = f"/directives/{site.TURNS}"
        assert decided(srv.port, path) == Directives()
        assert srv.bump_generation() == 1
        assert decided(srv.port, path) == Directives(noindex=True)
        assert decided(srv.port, "/directives/plain") == Directives()  # the rest stands


def test_unknown_paths_404_and_the_origin_is_off_by_default(server: SandboxServer) -> None:
    assert get(server.port, "/directives/nope")[0] == 404
    assert get(server.port, "/targets/nope")[0] == 404
    assert get(server.port, "/robots.txt")[0] == 200
    with SandboxServer(SandboxWeb(seed=7, generated_origins=0)) as plain:
        assert get(plain.port, "/")[0] == 421  # not a host of the plain sandbox


def test_atlas_web_directives_serves_every_page_as_its_ground_truth_says(tmp_path: Path) -> None:
    """`atlas web --directives` in its own process serves the same origin."""
    with running_sandbox(tmp_path / "requests.jsonl", 0, 12, directives=True) as web:
        for path in site.pages():
            want_noindex, want_nofollow = site.says(path)
            got = decided(web.port, path)
            assert (got.noindex, got.nofollow) == (want_noindex, want_nofollow), path
