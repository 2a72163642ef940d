"""The crawl config: defaults, one-line ConfigErrors, env overrides and path anchoring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from atlas_pipeline import defaults as d
from atlas_pipeline.config import config_from_mapping, dump_config, load_config
from atlas_pipeline.errors import ConfigError


def write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def error_of(raw: dict[str, Any], tmp_path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path / "crawl.yaml", raw))
    return str(info.value)


def assert_one_line(msg: str) -> None:
    assert "\n" not in msg
    assert "Traceback" not in msg
    assert "pydantic" not in msg.lower()
    assert "errors.pydantic.dev" not in msg


def test_defaults_load_without_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config(env={})
    assert cfg.user_agent == d.USER_AGENT
    assert cfg.shards == d.SHARDS
    assert cfg.politeness.min_gap_s == d.MIN_GAP_S
    assert cfg.politeness.max_in_flight == d.MAX_IN_FLIGHT
    assert cfg.robots.max_bytes == d.ROBOTS_MAX_BYTES
    assert cfg.seeds == []
    assert cfg.resolve_only is False
    assert cfg.data_dir == (tmp_path / "atlas_data").resolve()


def test_empty_file_is_the_defaults(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path / "crawl.yaml", ""))
    assert cfg.shards == d.SHARDS
    assert cfg.data_dir == tmp_path.resolve() / "atlas_data"


def test_env_names_the_config_file(tmp_path: Path) -> None:
    path = write(tmp_path / "crawl.yaml", {"shards": 7})
    assert load_config(env={"ATLAS_CONFIG": str(path)}).shards == 7
    # an explicit path wins over the environment
    other = write(tmp_path / "other.yaml", {"shards": 9})
    assert load_config(other, env={"ATLAS_CONFIG": str(path)}).shards == 9


@pytest.mark.parametrize(
    ("raw", "must_contain"),
    [
        ({"politness": {}}, ["unknown key 'politness'", "did you mean 'politeness'"]),
        ({"politeness": {"min_gap": 1}}, ["'politeness.min_gap'", "did you mean 'min_gap_s'"]),
        ({"scope": {"max_depht": 3}}, ["'scope.max_depht'", "did you mean 'max_depth'"]),
        ({"zzzzzz": 1}, ["unknown key 'zzzzzz'", "known keys:", "user_agent"]),
    ],
)
def test_unknown_key_is_one_line_with_a_hint(
    raw: dict[str, Any], must_contain: list[str], tmp_path: Path
) -> None:
    msg = error_of(raw, tmp_path)
    assert_one_line(msg)
    assert msg.startswith(str(tmp_path / "crawl.yaml"))
    for part in must_contain:
        assert part in msg


@pytest.mark.parametrize(
    ("raw", "key", "detail"),
    [
        ({"politeness": {"min_gap_s": -1}}, "politeness.min_gap_s", "-1"),
        ({"politeness": {"max_in_flight": 0}}, "politeness.max_in_flight", "0"),
        ({"shards": "abc"}, "shards", "'abc'"),
        ({"seeds": ["ftp://example.test/"]}, "seeds", "ftp://example.test/"),
        ({"seeds": ["not a url"]}, "seeds", "not a url"),
        ({"resolve": {"a.test": "1.2.3.999"}}, "resolve", "1.2.3.999"),
        ({"resolve": {"a.test": "localhost"}}, "resolve", "localhost"),
        ({"user_agent": "/1.0"}, "user_agent", "product token"),
        ({"coordination_url": "mysql://x/y"}, "coordination_url", "sqlite:///"),
        ({"limits": {"total_timeout_s": 0}}, "limits.total_timeout_s", "0"),
        ({"politeness": 3}, "politeness", "politeness"),
        (
            {"politeness": {"max_in_flight": 8, "global_concurrency": 4}},
            "(top level)",
            "politeness.max_in_flight",
        ),
        ({"user_agent": "Bad\nBot/1"}, "user_agent", "Bad"),
    ],
)
def test_bad_value_is_one_line_naming_the_key(
    raw: dict[str, Any], key: str, detail: str, tmp_path: Path
) -> None:
    msg = error_of(raw, tmp_path)
    assert_one_line(msg)
    assert f": {key}: " in msg
    assert detail in msg


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    msg = str(info.value)
    assert_one_line(msg)
    assert "nope.yaml" in msg
    assert "does not exist" in msg


@pytest.mark.parametrize("text", ["seeds: [\n  - x\n", "a: b: c\n", "key: [1,\n"])
def test_invalid_yaml(text: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path / "crawl.yaml", text))
    msg = str(info.value)
    assert_one_line(msg)
    assert "crawl.yaml" in msg
    assert "not valid YAML" in msg
    assert "line " in msg


@pytest.mark.parametrize(("text", "kind"), [("- a\n- b\n", "list"), ("42\n", "int")])
def test_top_level_must_be_a_mapping(text: str, kind: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path / "crawl.yaml", text))
    msg = str(info.value)
    assert_one_line(msg)
    assert "mapping" in msg
    assert kind in msg


def test_config_error_has_no_chained_cause(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path / "crawl.yaml", {"politeness": {"min_gap_s": -1}}))
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__


def test_data_dir_env_override(tmp_path: Path) -> None:
    path = write(tmp_path / "crawl.yaml", {"data_dir": "from_file"})
    assert load_config(path).data_dir == tmp_path.resolve() / "from_file"
    other = tmp_path / "elsewhere"
    cfg = load_config(path, env={"ATLAS_DATA_DIR": str(other)})
    assert cfg.data_dir == other
    assert cfg.lake_path == other / "lake"
    assert cfg.coordination == f"sqlite:///{other / 'coordination.db'}"


def test_seeds_file_is_merged(tmp_path: Path) -> None:
    (tmp_path / "seeds.txt").write_text(
        "# publishers\nhttps://b.example.test/x\n\n  https://a.example.test/  \n"
        "https://c.example.test/\n",
        encoding="utf-8",
    )
    path = write(
        tmp_path / "crawl.yaml", {"seeds": ["https://a.example.test/"], "seeds_file": "seeds.txt"}
    )
    cfg = load_config(path)
    assert cfg.seeds == [
        "https://a.example.test/",
        "https://b.example.test/x",
        "https://c.example.test/",
    ]
    assert cfg.seeds_file == tmp_path.resolve() / "seeds.txt"
    assert cfg.seed_hosts == ["a.example.test", "b.example.test", "c.example.test"]
    assert cfg.scope_hosts == frozenset(cfg.seed_hosts)


def test_bad_url_in_seeds_file(tmp_path: Path) -> None:
    (tmp_path / "seeds.txt").write_text("https://ok.test/\nmailto:x@y.test\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path / "crawl.yaml", {"seeds_file": "seeds.txt"}))
    msg = str(info.value)
    assert_one_line(msg)
    assert "seeds_file" in msg
    assert "mailto:x@y.test" in msg


def test_missing_seeds_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path / "crawl.yaml", {"seeds_file": "gone.txt"}))
    msg = str(info.value)
    assert_one_line(msg)
    assert "seeds_file" in msg
    assert "gone.txt" in msg


def test_relative_paths_anchor_at_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    path = write(
        conf_dir / "crawl.yaml",
        {
            "data_dir": "data",
            "lake_root": "../lake",
            "bodies_dir": str(tmp_path / "abs_bodies"),
            "coordination_url": "sqlite:///state/coord.db",
        },
    )
    cfg = load_config(path)
    base = conf_dir.resolve()
    assert cfg.data_dir == base / "data"
    assert cfg.lake_path == tmp_path.resolve() / "lake"
    assert cfg.bodies_path == tmp_path / "abs_bodies"
    assert cfg.coordination == f"sqlite:///{base / 'state' / 'coord.db'}"


def test_absolute_sqlite_and_postgres_urls_are_kept(tmp_path: Path) -> None:
    for url in ["sqlite:////var/tmp/c.db", "postgresql://u@db/atlas"]:
        cfg = load_config(write(tmp_path / "crawl.yaml", {"coordination_url": url}))
        assert cfg.coordination == url


def test_coordination_defaults_under_data_dir(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path / "crawl.yaml", {"data_dir": "d"}))
    assert cfg.coordination == f"sqlite:///{tmp_path.resolve() / 'd' / 'coordination.db'}"
    assert cfg.lake_path == tmp_path.resolve() / "d" / "lake"
    assert cfg.bodies_path == tmp_path.resolve() / "d" / "bodies"


@pytest.mark.parametrize(
    ("ua", "token"),
    [
        ("AtlasBot/1.0 (+https://atlas.example.test/bot)", "AtlasBot"),
        ("Foo-Bot/2", "Foo-Bot"),
        ("  SimpleBot  ", "SimpleBot"),
    ],
)
def test_robots_token_from_user_agent(ua: str, token: str, tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path / "crawl.yaml", {"user_agent": ua}))
    assert cfg.robots_token == token


def test_resolve_hosts_are_normalized(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path / "crawl.yaml", {"resolve": {"News.Test.": "127.0.0.1"}}))
    assert cfg.resolve == {"news.test": "127.0.0.1"}


def test_lease_outlives_the_request() -> None:
    cfg = config_from_mapping(
        {"limits": {"total_timeout_s": 12, "lease_margin_s": 5}}, base_dir=Path("/")
    )
    assert cfg.lease_s == 17


def test_dump_round_trips(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path / "crawl.yaml", {"shards": 3, "seeds": ["https://a.test/"]}))
    again = load_config(write(tmp_path / "dumped.yaml", dump_config(cfg)))
    assert again == cfg


def test_hosts_in_the_config_are_spelled_as_normalized_urls_spell_them(tmp_path: Path) -> None:
    from atlas_pipeline.config import config_from_mapping

    raw = {"seeds": ["https://Bücher.example/x"],
           "scope": {"allowed_hosts": ["Straße.de.", "0x7f.1"], "allowed_domains": ["ÖBB.at"]}}  # fmt: skip
    cfg = config_from_mapping(raw, base_dir=tmp_path)
    assert cfg.seed_hosts == ["xn--bcher-kva.example"]
    assert cfg.scope.allowed_hosts == ["xn--strae-oqa.de", "127.0.0.1"]
    assert cfg.scope.allowed_domains == ["xn--bb-eka.at"]
    with pytest.raises(ConfigError, match="allowed_hosts"):
        config_from_mapping({"scope": {"allowed_hosts": ["exa mple.test"]}}, base_dir=tmp_path)


def test_tracking_lists_are_configurable_per_origin(tmp_path: Path) -> None:
    from atlas_pipeline.config import config_from_mapping
    from atlas_pipeline.scope import ScopeGuard

    raw = {"seeds": ["https://shop.example/", "https://other.example/"],
           "url_identity": {"per_origin": {"https://Shop.example": {"add": ["ref"], "keep": ["fbclid"]}}}}  # fmt: skip
    guard = ScopeGuard(config_from_mapping(raw, base_dir=tmp_path))
    base = "https://shop.example/"
    assert guard.judge("/a?ref=1&fbclid=2&utm_source=x&q=1", base, 1, base).url == (
        "https://shop.example/a?fbclid=2&q=1"
    )
    other = "https://other.example/"
    assert guard.judge("/a?ref=1&fbclid=2", other, 1, other).url == "https://other.example/a?ref=1"
    bad = {"url_identity": {"per_origin": {"not an origin": {"add": ["x"]}}}}
    with pytest.raises(ConfigError, match="per_origin"):
        config_from_mapping(bad, base_dir=tmp_path).tracking_policy()


def test_an_indexer_sink_must_be_http_or_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"indexer\.sink"):
        config_from_mapping({"indexer": {"sink": "ftp://indexer.test/"}}, base_dir=tmp_path)
    cfg = config_from_mapping({"indexer": {"sink": "file:///srv/events"}}, base_dir=tmp_path)
    assert cfg.indexer.sink == "file:///srv/events"


@pytest.mark.parametrize(
    ("ua", "named"),
    [
        ("Bot2000/1.0", "'Bot2000'"),
        ("Bot2000", "'Bot2000'"),
        ("B\u00f6tli/1.0", "'B\u00f6tli'"),
        ("Atlas Bot/1.0", "'Atlas Bot'"),
        ("Atlas.Bot/1.0", "'Atlas.Bot'"),
    ],
)
def test_user_agent_product_token_must_be_rfc9309(ua: str, named: str, tmp_path: Path) -> None:
    # RFC 9309 2.2.1: robots.txt groups are matched on a [a-zA-Z_-]+ product token.
    msg = error_of({"user_agent": ua}, tmp_path)
    assert_one_line(msg)
    assert ": user_agent: " in msg
    assert f"product token {named} must be letters, '_' or '-'" in msg
    assert "RFC 9309 2.2.1" in msg
    assert "e.g. 'AtlasBot/1.0'" in msg


def test_user_agent_refuses_control_characters(tmp_path: Path) -> None:
    msg = error_of({"user_agent": "AtlasBot/1.0\r\nX-Injected: 1"}, tmp_path)
    assert_one_line(msg)
    assert ": user_agent: " in msg
    assert "control characters" in msg


@pytest.mark.parametrize(
    ("ua", "token"),
    [
        ("Atlas_Bot-x/2.1", "Atlas_Bot-x"),
        ("atlas-bot", "atlas-bot"),
        ("AtlasBot/1.0\t(+https://atlas.example.test/bot)", "AtlasBot"),
        (d.USER_AGENT, "AtlasBot"),
    ],
)
def test_user_agent_rfc9309_tokens_accepted(ua: str, token: str, tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path / "crawl.yaml", {"user_agent": ua}))
    assert cfg.user_agent == ua
    assert cfg.robots_token == token


BAD_SEEDS = [
    ("http://exa mple.com/", "bad host"),
    ("http://a.example.test:99999/", "bad port"),
    ("ftp://a.example.test/", "not an http(s) URL"),
    ("http:///no-host", "not an http(s) URL"),
    ("a.example.test/page", "not an http(s) URL"),
]


@pytest.mark.parametrize(("seed", "why"), BAD_SEEDS, ids=[s for s, _ in BAD_SEEDS])
def test_a_bad_seed_fails_at_load_naming_its_position(tmp_path: Path, seed: str, why: str) -> None:
    raw = {"seeds": ["http://ok.example.test/", seed], "data_dir": str(tmp_path)}
    with pytest.raises(ConfigError) as info:
        config_from_mapping(raw, base_dir=tmp_path)
    msg = str(info.value)
    assert_one_line(msg)
    assert "seeds[1]" in msg and repr(seed) in msg and why in msg, msg


@pytest.mark.parametrize(("seed", "why"), BAD_SEEDS, ids=[s for s, _ in BAD_SEEDS])
def test_a_bad_line_of_a_seeds_file_fails_naming_its_line(
    tmp_path: Path, seed: str, why: str
) -> None:
    (tmp_path / "seeds.txt").write_text(f"# seeds\nhttp://ok.example.test/\n{seed}\n", "utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path / "crawl.yaml", {"seeds_file": "seeds.txt"}))
    msg = str(info.value)
    assert_one_line(msg)
    assert f"seeds.txt:3: seed {seed!r}" in msg and why in msg, msg


@pytest.mark.parametrize(("seed", "why"), BAD_SEEDS, ids=[s for s, _ in BAD_SEEDS])
def test_a_bad_line_of_the_partner_feed_fails_naming_its_line(
    tmp_path: Path, seed: str, why: str
) -> None:
    from atlas_pipeline.scope import read_feed

    feed = tmp_path / "feed.txt"
    feed.write_text(f"http://ok.example.test/\t0.5\n\n{seed}\t0.2\n", "utf-8")
    with pytest.raises(ConfigError) as info:
        read_feed(feed)
    msg = str(info.value)
    assert_one_line(msg)
    assert f"feed.txt:3: seed {seed!r}" in msg and why in msg, msg
