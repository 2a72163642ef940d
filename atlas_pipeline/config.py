"""One crawl config: a YAML file (or the embedded defaults) loaded into a typed, validated object.

Relative paths in a file resolve against that file's folder; the embedded defaults resolve
against the working directory. `ATLAS_CONFIG` names the file and `ATLAS_DATA_DIR` overrides
`data_dir`; the caller passes the environment in, the engine never reads it.
"""

from __future__ import annotations

import copy
import difflib
import ipaddress
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml  # type: ignore[import-untyped,unused-ignore]
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import defaults as d
from .errors import ConfigError
from .robots import crawler_token
from .url_rules import Rule, compile_pattern
from .urls import (
    BadUrl,
    TrackingParams,
    TrackingPolicy,
    canonical_host,
    has_userinfo,
    host_of,
    normalize,
    origin_of,
    redact_userinfo,
)

ENV_CONFIG = "ATLAS_CONFIG"
ENV_SET = "ATLAS_SET"
LAKE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "file")
ENV_DATA_DIR = "ATLAS_DATA_DIR"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Politeness(_Section):
    """Per-origin pacing; it lives in the coordination store, so every run shares it."""

    min_gap_s: float = Field(d.MIN_GAP_S, ge=0)
    """Minimum seconds between the starts of two requests to one origin."""
    max_in_flight: int = Field(d.MAX_IN_FLIGHT, ge=1, le=64)
    """Most requests in flight to one origin at once."""
    global_concurrency: int = Field(d.GLOBAL_CONCURRENCY, ge=1, le=4096)
    """Most requests in flight in one fetch batch, all origins together."""
    gap_from: Literal["answer", "send"] = "answer"
    """Where the gap starts: the previous request's answer or failure (the origin had begun it by its answer) or its send (faster, but an origin that queued it sees the next one sooner)."""
    gap_guard_s: float = Field(d.GAP_GUARD_S, ge=0, le=1)
    """Added to every non-zero gap, because a request reaches the origin a little after its claim."""
    crawl_delay_cap_s: float = Field(d.CRAWL_DELAY_CAP_S, ge=0)
    """A robots.txt Crawl-delay widens the gap up to this many seconds, no further."""
    bucket: Literal["origin", "domain", "ip"] = "origin"
    """One clock and in-flight cap per origin, per registrable domain or per IP address."""
    adaptive_max_gap_s: float = Field(d.ADAPTIVE_MAX_GAP_S, ge=0)
    """Overload (429, timeout, slow or repeated 5xx) doubles an origin's gap up to this (0: off)."""
    overload_share: float = Field(d.OVERLOAD_SHARE, gt=0, le=1)
    """Recent 5xx share from which a URL's repeated 5xx slows its origin (else: a page hiccup)."""
    recover_steps: int = Field(d.RECOVER_STEPS, ge=1, le=1000)
    """Healthy answers that raise an origin's rate back from its slowest to the configured one."""
    classes: dict[str, list[str]] = Field(default_factory=dict)
    """Fairness classes: class name -> hosts or registrable domains; others are their own class."""
    class_quota: float = Field(d.CLASS_QUOTA, gt=0, le=1)
    """Most share of recent attempts one class takes while other classes have eligible work."""
    class_window_s: float = Field(d.CLASS_WINDOW_S, gt=0)
    """Half-life in seconds of the recent-attempt counts that the class quota judges."""
    starvation_bound_s: float = Field(d.STARVATION_BOUND_S, gt=0)
    """An origin with eligible work waiting longer than this is served next, quota or not."""
    aging_per_hour: float = Field(d.AGING_PER_HOUR, ge=0)
    """Priority a queued URL gains per hour it waits, so budgets never postpone it forever."""

    @field_validator("classes")
    @classmethod
    def _lower_members(cls, classes: dict[str, list[str]]) -> dict[str, list[str]]:
        return {k: [h.strip().lower().rstrip(".") for h in v] for k, v in classes.items()}


class UrlRule(_Section):
    """One allow/deny rule of `scope.url_rules` (url_rules.py): the first that matches decides."""

    action: Literal["allow", "deny"]
    """deny: rejected (url_rule_denied); allow: left to the other scope rules."""
    pattern: str
    """A glob over the whole canonical URL, or a regular expression found anywhere in it."""
    kind: Literal["glob", "regex"] = "glob"
    """How `pattern` is read."""
    origin: str | None = None
    """Only URLs of this origin (e.g. https://example.com/); default every origin."""

    @model_validator(mode="after")
    def _compiles(self) -> UrlRule:
        try:
            compile_pattern(self.kind, self.pattern)
        except ValueError as exc:
            raise ValueError(f"pattern {self.pattern!r}: {exc}") from None
        return self

    @field_validator("origin")
    @classmethod
    def _origin(cls, origin: str | None) -> str | None:
        if origin is None:
            return None
        try:
            return origin_of(normalize(origin))
        except BadUrl as exc:
            raise ValueError(f"not an origin URL ({exc})") from None

    def rule(self) -> Rule:
        return Rule(self.action, self.pattern, self.kind, self.origin)


class Scope(_Section):
    """Which URLs may enter the crawl at all."""

    url_rules: list[UrlRule] = Field(default_factory=list)
    """Ordered allow/deny URL rules (glob or regex, global or per origin); the first match
    decides, a deny rejects with url_rule_denied, no match leaves it to the other rules."""

    allowed_hosts: list[str] = Field(default_factory=list)
    """Hosts that may be crawled; empty means the seeds' hosts."""
    max_depth: int = Field(d.MAX_DEPTH, ge=0)
    """Most link hops from a seed."""
    max_pages_per_origin: int = Field(d.MAX_PAGES_PER_ORIGIN, ge=1)
    """URLs admitted to one cycle's queue per origin; the rest wait for later cycles."""
    max_url_length: int = Field(d.MAX_URL_LENGTH, ge=16)
    """Longer URLs are rejected."""
    follow_nofollow: bool = False
    """Whether nofollow links are followed: rel=nofollow ones, and all of a nofollow page's."""
    allowed_domains: list[str] = Field(default_factory=list)
    """Registrable domains (public-suffix aware) whose every host may be crawled."""
    session_params: list[str] = Field(default_factory=lambda: list(d.SESSION_PARAMS))
    """Session-id keys: dropped from links when the value looks like a token (;jsessionid= too)."""
    page_params: list[str] = Field(default_factory=lambda: list(d.PAGE_PARAMS))
    """Query keys holding a page number (besides /page/N paths)."""
    max_page_number: int = Field(d.MAX_PAGE_NUMBER, ge=1)
    """Pagination links past this page are cut (pagination_cap)."""
    max_repeated_segments: int = Field(d.MAX_REPEATED_SEGMENTS, ge=1)
    """Paths repeating a run of segments more often in a row are cut (repeating_path)."""
    max_query_variants: int = Field(d.MAX_QUERY_VARIANTS, ge=1)
    """Worded query strings per origin, path and key set: facets, searches (query_variant_cap)."""
    max_pattern_urls: int = Field(d.MAX_PATTERN_URLS, ge=1)
    """URLs per origin that differ only in their digits (path_pattern_cap)."""
    max_calendar_urls: int = Field(d.MAX_CALENDAR_URLS, ge=1)
    """URLs per origin that differ only in a date, such as calendar pages (calendar_cap)."""
    max_path_variants: int = Field(d.MAX_PATH_VARIANTS, ge=1)
    """Worded query strings per origin and path, whatever their keys (path_variant_cap)."""
    novelty_window: int = Field(d.NOVELTY_WINDOW, ge=1)
    """A path's query variants fetched in a row with no new URL or text before they stop (trap_no_novelty)."""
    bloom_prefilter: int = Field(0, ge=0)
    """Known-URL Bloom prefilter sized for this many URLs (0: off); "maybe" is always checked."""

    @field_validator("allowed_hosts", "allowed_domains")
    @classmethod
    def _canonical_hosts(cls, hosts: list[str]) -> list[str]:
        # spelled as normalized URLs spell them: 'Bücher.example' must match xn--bcher-kva
        out = []
        for h in hosts:
            try:
                out.append(canonical_host(h.strip()))
            except BadUrl as exc:
                raise ValueError(f"{h!r} is not a host name: {exc}") from None
        return out

    @field_validator("session_params", "page_params")
    @classmethod
    def _lower_keys(cls, keys: list[str]) -> list[str]:
        return [k.strip().lower() for k in keys]


class TrackingOverride(_Section):
    """One origin's changes to the tracking list."""

    add: list[str] = Field(default_factory=list)
    """More query keys to drop on this origin."""
    add_prefixes: list[str] = Field(default_factory=list)
    """More key prefixes to drop on this origin."""
    keep: list[str] = Field(default_factory=list)
    """Keys this origin needs, never dropped here even if listed."""


class UrlIdentity(_Section):
    """Which query parameters are dropped from URLs because they only track the visitor."""

    tracking_params: list[str] = Field(default_factory=lambda: list(d.TRACKING_PARAMS))
    """Query keys dropped from every URL (compared case-insensitively)."""
    tracking_prefixes: list[str] = Field(default_factory=lambda: list(d.TRACKING_PREFIXES))
    """Query key prefixes dropped from every URL."""
    per_origin: dict[str, TrackingOverride] = Field(default_factory=dict)
    """Per-origin changes, keyed by origin (e.g. https://shop.example)."""


class Limits(_Section):
    """Byte, time and retry bounds for every fetch."""

    max_body_bytes: int = Field(d.MAX_BODY_BYTES, ge=1024)
    """Most decompressed body bytes read from one response."""
    total_timeout_s: float = Field(d.TOTAL_TIMEOUT_S, gt=0)
    """Whole-request time cap, connect to last byte."""
    connect_timeout_s: float = Field(d.CONNECT_TIMEOUT_S, gt=0)
    """TCP/TLS connect time cap."""
    read_timeout_s: float = Field(d.READ_TIMEOUT_S, gt=0)
    """Longest silence between two reads of one response (a drip still dies on the total)."""
    max_header_bytes: int = Field(d.MAX_HEADER_BYTES, ge=1024, le=1024 * 1024)
    """Most bytes of response headers, all lines together; more is quarantined."""
    max_redirects: int = Field(d.MAX_REDIRECTS, ge=0, le=20)
    """Redirect hops followed from the first URL of a chain; the next one ends it."""
    parser_cpu_s: float = Field(d.PARSER_CPU_S, gt=0)
    """CPU seconds one document may cost its parser process before it is quarantined."""
    parser_memory_mb: int = Field(d.PARSER_MEMORY_MB, ge=0)
    """MiB a parser process may map beyond its warm size (0: no cap); over it, quarantined."""
    lease_margin_s: float = Field(d.LEASE_MARGIN_S, ge=1)
    """A lease lasts total_timeout_s plus this, so no request outlives its lease."""
    batch_max_idle_s: float = Field(d.BATCH_MAX_IDLE_S, ge=0)
    """A fetch batch ends when its next eligible origin is further away than this."""
    batch_max_s: float = Field(0.0, ge=0)
    """A fetch batch claims nothing more after this many seconds (0: no limit), like Nutch's
    fetcher.timelimit.mins: requests in flight finish, the open URLs wait for the next cycle
    (cycle_deadline), so one slow or backed-off origin cannot hold a cycle open."""
    max_attempts: int = Field(d.MAX_ATTEMPTS, ge=1)
    """Fetch attempts per URL before it becomes terminal."""
    retry_backoff_s: float = Field(d.RETRY_BACKOFF_S, ge=0)
    """Base delay before a failed URL is eligible again: attempt n waits between half and
    all of base x 2^(n-1), capped at an hour."""
    store_outage_s: float = Field(d.STORE_OUTAGE_S, gt=0)
    """How long a batch waits out an unreachable coordination store before it fails."""
    interrupt_grace_s: float = Field(d.INTERRUPT_GRACE_S, ge=0)
    """After Ctrl-C, seconds requests in flight get to finish before their URLs go back."""
    progress_every_s: float = Field(10.0, gt=0)
    """Seconds between a fetch batch's progress lines in its run's log (one more at its end)."""


class Discovery(_Section):
    """Where URLs come from besides links: sitemaps and a partner feed."""

    sitemaps: list[str] = Field(default_factory=list)
    """Sitemap URLs to read besides those robots.txt announces."""
    robots_sitemaps: bool = True
    """Read the sitemaps each origin's robots.txt announces."""
    sitemap_max_bytes: int = Field(d.SITEMAP_MAX_BYTES, ge=1024)
    """Most bytes of one sitemap, uncompressed; a bigger one is quarantined."""
    feed_file: Path | None = None
    """A partner feed: one URL a line, optionally a tab and a priority between 0 and 1."""
    path_ascending: bool = False
    """Also offer each fetched page's parent paths (/a/b/c -> /a/b/, /a/)."""

    @field_validator("sitemaps")
    @classmethod
    def _sitemap_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            _check_http_url(url)
        return urls


class Dedupe(_Section):
    """Near-duplicate clustering of documents (labels only: every document is kept)."""

    threshold: float = Field(d.DEDUPE_THRESHOLD, gt=0, le=1)
    """Estimated Jaccard similarity of word shingles that makes two documents candidates."""
    num_perm: int = Field(d.DEDUPE_NUM_PERM, ge=16, le=1024)
    """MinHash permutations: more is more precise and slower."""
    shingle_words: int = Field(d.DEDUPE_SHINGLE_WORDS, ge=1, le=20)
    """Words per shingle."""
    volatile_words: int = Field(d.DEDUPE_VOLATILE_WORDS, ge=0)
    """A differing line this short (or carrying a time) is a box, not the story."""
    split_urls: list[str] = Field(default_factory=list)
    """URLs an operator took out of their cluster: each is labelled alone (undoes a merge)."""


class Indexer(_Section):
    """Where the index_delivery sensor sends documents' events."""

    sink: str | None = None
    """http(s)://host/path (POST {"events": [...]}) or file:///folder (JSON lines); none: off."""
    batch_size: int = Field(d.INDEX_BATCH_SIZE, ge=1, le=10_000)
    """Events per request or file."""

    @field_validator("sink")
    @classmethod
    def _known_sink(cls, sink: str | None) -> str | None:
        if sink and urlsplit(sink).scheme not in ("http", "https", "file", ""):
            raise ValueError("use http(s)://host/path or file:///folder")
        return sink


class Recrawl(_Section):
    """Adaptive revisits (recrawl.py) and the refresh/discovery split of each cycle."""

    min_interval_s: float = Field(d.MIN_REVISIT_S, gt=0)
    """Shortest revisit interval, however often a page changes."""
    max_interval_s: float = Field(d.MAX_REVISIT_S, gt=0)
    """Longest revisit interval, however still a page is."""
    jitter: float = Field(d.REVISIT_JITTER, ge=0, lt=1)
    """Intervals are spread by this fraction either way."""
    max_growth: float = Field(d.REVISIT_MAX_GROWTH, ge=1)
    """An interval grows at most this many times per check."""
    history: int = Field(d.CHANGE_HISTORY, ge=2, le=1000)
    """Content checks kept per URL for the change-rate estimate."""
    discovery_share: float = Field(d.DISCOVERY_SHARE, ge=0, le=1)
    """Share of each origin's cycle budget kept for never-fetched URLs (unused share is lent)."""
    untrusted_after: int = Field(d.UNTRUSTED_AFTER, ge=1)
    """Misleading validator answers (a 200 to a conditional request for unchanged content)
    after which an origin is fetched unconditionally."""

    @model_validator(mode="after")
    def _bounds(self) -> Recrawl:
        if self.min_interval_s > self.max_interval_s:
            raise ValueError("recrawl.min_interval_s must not exceed recrawl.max_interval_s")
        return self


class FreshnessTarget(_Section):
    """One priority class's freshness target."""

    min_priority: float = Field(ge=0, le=1)
    """URLs with at least this priority (and under the next class's) belong to the class."""
    target_s: float = Field(gt=0)
    """A URL not checked for longer than this is stale."""


class Freshness(_Section):
    """Freshness targets, checked by Dagster asset checks, and the cycle schedule."""

    classes: dict[str, FreshnessTarget] = Field(
        default_factory=lambda: dict(d.FRESHNESS_CLASSES),
        validate_default=True,
    )
    """Priority classes: name -> {min_priority, target_s}."""
    max_stale_share: float = Field(d.MAX_STALE_SHARE, ge=0, le=1)
    """A class fails its check when more than this share of its fetched URLs is stale."""
    table_max_age_s: float = Field(d.TABLE_MAX_AGE_S, gt=0)
    """A lake table whose last write is older than this fails its recency check."""
    cycle_cron: str = d.CYCLE_CRON
    """Cron cadence of `crawl_cycle_sensor` (a new cycle of every shard per tick)."""

    @field_validator("classes")
    @classmethod
    def _some_class(cls, classes: dict[str, FreshnessTarget]) -> dict[str, FreshnessTarget]:
        if not classes:
            raise ValueError(
                "needs at least one class, e.g. {low: {min_priority: 0, target_s: 2592000}}"
            )
        return classes

    @field_validator("cycle_cron")
    @classmethod
    def _cron(cls, cron: str) -> str:
        return _check_cron(cron)


class Retention(_Section):
    """How long each data class is kept (the retention job, daily)."""

    body_days: float = Field(d.BODY_RETENTION_DAYS, gt=0)
    """Raw bodies of fetches committed longer ago are deleted, unless a URL's current
    content or a newer fetch still names them."""
    document_days: float = Field(d.DOCUMENT_RETENTION_DAYS, gt=0)
    """Document versions older than this and superseded by a newer version of their URL are
    deleted, with their links, cluster labels and outbox events."""
    cron: str = d.RETENTION_CRON
    """Cron cadence of the retention schedule."""

    @field_validator("cron")
    @classmethod
    def _cron(cls, cron: str) -> str:
        return _check_cron(cron)


class Dns(_Section):
    """The egress gate's DNS cache: only validated answers are kept."""

    ttl_s: float = Field(d.DNS_TTL_S, ge=0)
    """Seconds an answer is trusted when the lookup reports no TTL (the system resolver)."""
    max_ttl_s: float = Field(d.DNS_MAX_TTL_S, ge=0)
    """Longer TTLs are cut to this, so a moved host is seen again in time."""
    negative_ttl_s: float = Field(d.DNS_NEGATIVE_TTL_S, ge=0)
    """Seconds a refusal (lookup failure or a non-public answer) is remembered."""
    cache_entries: int = Field(d.DNS_CACHE_ENTRIES, ge=1)
    """Names kept; the oldest goes first."""


class Render(_Section):
    """The render lane: headless Chromium for the page classes whose text a script draws,
    decided by measurement, every browser request answered by Atlas itself."""

    enabled: bool = True
    """Use the lane where a page class needs it (no browser installed: render_unavailable)."""
    skip_above_words: int = Field(200, ge=0)
    """A page whose raw HTML gives this many words is never rendered (it counts as a sample)."""
    sample_pages: int = Field(3, ge=1)
    """Pages of each origin and page class rendered to measure before the class is decided."""
    min_share: float = Field(0.5, gt=0, le=1)
    """Render a class when the raw HTML recovers less than this share of the rendered words."""
    min_words: int = Field(50, ge=0)
    """... or fewer words a page than this where the rendered page has at least as many."""
    resample_after_s: float = Field(7 * 86400.0, gt=0)
    """A class's decision is measured afresh after this long."""
    page_classes: list[str] = Field(default_factory=list)
    """Path globs naming page classes (first match); other paths: their first segment."""
    concurrency: int = Field(2, ge=1)
    """Pages rendered at once in one fetch batch."""
    queue: int = Field(4, ge=0)
    """Pages that may wait for a render slot; more fall back to the raw HTML at once."""
    budget_s: float = Field(300.0, ge=0)
    """Render seconds one fetch batch may spend (0: none); past it, pages fall back."""
    navigation_timeout_s: float = Field(15.0, gt=0)
    """Longest wait for a rendered page's load event (then its DOM is read as it stands)."""
    page_timeout_s: float = Field(20.0, gt=0)
    """Whole-render cap of one page, its subrequests included; past it, it falls back."""
    settle_s: float = Field(8.0, ge=0)
    """Longest wait after the load event for a quiet network (slow XHRs) before the DOM is
    read; a page still loading then is read as it stands."""
    max_dom_bytes: int = Field(5 * 1024 * 1024, ge=1024)
    """A rendered DOM larger than this falls back to the raw HTML."""
    max_browser_mib: int = Field(1024, ge=0)
    """Memory (PSS, MiB) the browser's processes may hold together; past it the pages
    rendering are closed and fall back as render_memory_cap (0: no cap; Linux only)."""
    abort_types: list[str] = Field(default_factory=lambda: ["image", "media", "font", "stylesheet"])
    """Browser resource types refused before any request: they carry no text (and a waiting
    stylesheet would hold back the scripts after it)."""


class Robots(_Section):
    """robots.txt caching and failure handling (RFC 9309)."""

    cache_s: float = Field(d.ROBOTS_CACHE_S, gt=0)
    """A successfully fetched robots.txt is trusted this long."""
    max_bytes: int = Field(d.ROBOTS_MAX_BYTES, ge=1024)
    """Bytes of robots.txt parsed; the rest is ignored."""
    unreachable_backoff_s: float = Field(d.ROBOTS_UNREACHABLE_BACKOFF_S, ge=0)
    """Origin backoff after a robots.txt 5xx or network failure."""
    stale_grace_s: float = Field(d.ROBOTS_STALE_GRACE_S, ge=0)
    """How long the last good robots.txt may stand in while the origin is unreachable."""
    throttled_backoff_s: float = Field(d.ROBOTS_429_BACKOFF_S, ge=0)
    """Origin backoff after a robots.txt 429 without Retry-After."""


class RegionShare(_Section):
    """An origin's budget split into pre-leased shares (seed 003 decision 23)."""

    origin: str
    """The origin (scheme://host[:port]) whose rate and in-flight cap are split."""
    shares: dict[str, float]
    """Region name -> share of the origin's budget (0-1; together at most 1). Each region
    paces its share on its own and keeps it through a partition."""

    @field_validator("origin")
    @classmethod
    def _origin(cls, origin: str) -> str:
        try:
            return origin_of(normalize(origin.rstrip("/") + "/"))
        except BadUrl as exc:
            raise ValueError(f"{origin!r} is not an origin (scheme://host[:port]): {exc}") from exc


class Regions(_Section):
    """Several regions crawling together (seed 000 ch. 16): each has its own coordination
    store and owns origins through fenced leases from one control plane. Off (one region,
    no control plane) while `name` is empty."""

    name: str = ""
    """This run's region, one of `members`; empty: a single-region crawl."""
    members: list[str] = Field(default_factory=list)
    """Every region of the crawl; an origin with no home below is homed by a hash over them."""
    control_plane_url: str | None = None
    """The ownership store: postgresql://... (several machines) or sqlite:///path; default
    sqlite:///<data_dir>/control_plane.db."""
    lease_s: float = Field(30.0, gt=0)
    """How long an ownership lease lasts; the region stops dispatching to an origin at its end
    unless renewed."""
    renew_every_s: float = Field(5.0, gt=0)
    """How often a fetch batch renews its leases and asks for origins with work."""
    dispatch_margin_s: float = Field(1.0, ge=0)
    """Requests stop this long before the lease ends (clock skew between machines)."""
    takeover: Literal["lapse", "immediate"] = "lapse"
    """`lapse`: another region takes an origin only once its owner's lease has run out;
    `immediate`: once the owner has not renewed for `silent_after_s`, accepting an overshoot
    of at most lease_s x rate + the in-flight cap (printed by `atlas config`)."""
    silent_after_s: float = Field(15.0, gt=0)
    """With takeover: immediate, an owner this long without renewing counts as gone."""
    home_silent_s: float = Field(30.0, ge=0)
    """A region that has not called the control plane for this long counts as down: other
    regions may then take its home origins (failover). While it is up they never do."""
    homes: dict[str, str] = Field(default_factory=dict)
    """Host or parent domain -> its home region (first call on its origins)."""
    shares: list[RegionShare] = Field(default_factory=list)
    """Origins whose budget is split between regions instead of owned by one."""
    peer_lakes: dict[str, str] = Field(default_factory=dict)
    """The other regions' lake roots (region -> root, same storage options): the
    handoff_overshoot check judges each origin on every region's requests."""

    @field_validator("control_plane_url")
    @classmethod
    def _plane_scheme(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise ValueError(
                f"{redact_userinfo(url)!r} is not a control plane URL: use "
                "postgresql://user@host:5432/db or sqlite:///path"
            )
        return url

    @model_validator(mode="after")
    def _consistent(self) -> Regions:
        if not self.name:
            return self
        if self.name not in self.members:
            raise ValueError(
                f"regions.name {self.name!r} is not in regions.members {self.members}: "
                "list every region of the crawl in members"
            )
        if self.renew_every_s * 2 > self.lease_s:
            raise ValueError(
                f"regions.renew_every_s ({self.renew_every_s:g}) must be at most half of "
                f"regions.lease_s ({self.lease_s:g}), or one missed renewal loses the lease"
            )
        from .regions.ownership import check_shares

        for homed, region in self.homes.items():
            if region not in self.members:
                raise ValueError(f"regions.homes[{homed!r}] = {region!r} is not in members")
        for share in self.shares:
            wrong = check_shares(share.shares, self.members)
            if wrong:
                raise ValueError(f"regions.shares for {share.origin}: {wrong}")
        return self

    def share_of(self, origin: str) -> float | None:
        """This region's share of `origin`'s budget, if its budget is split."""
        for share in self.shares:
            if share.origin == origin:
                return share.shares.get(self.name, 0.0)
        return None


class CrawlConfig(_Section):
    """The whole crawl config. Every key has a default."""

    user_agent: str = d.USER_AGENT
    """User-Agent header; its first token (before '/') is the robots product token."""
    seeds: list[str] = Field(default_factory=list)
    """Seed URLs, inline."""
    seeds_file: Path | None = None
    """A file of seed URLs, one a line (# comments allowed); added to `seeds`."""
    data_dir: Path = Path(d.DATA_DIR)
    """Folder for the lake, the body store and SQLite files."""
    lake_root: str | None = None
    """Delta lake root: a local folder (default <data_dir>/lake) or object storage
    (s3://bucket/prefix, gs://bucket/prefix, az://container/prefix, abfss://...)."""
    lake_storage_options: dict[str, str] = Field(default_factory=dict)
    """deltalake storage options for an object-storage lake (AWS_ENDPOINT_URL, AWS_REGION,
    AWS_ALLOW_HTTP, GOOGLE_SERVICE_ACCOUNT, AZURE_STORAGE_ACCOUNT_NAME, ...); what is not given
    here comes from the same variables in the environment. Passed to every lake read and
    write, and to dbt's."""
    bodies_dir: Path | None = None
    """Content-addressed body store; default <data_dir>/bodies. Each body is one file, `<key>.zst`, that any zstd tool decompresses; the text Atlas extracted from it rides in the same file, in a zstd skippable frame after the body."""
    bodies_url: str | None = None
    """Object storage for bodies instead (s3://bucket/prefix?region=...&endpoint_override=...,
    gs://bucket/prefix); credentials from the environment (AWS_ACCESS_KEY_ID, ...)."""
    coordination_url: str | None = None
    """sqlite:///path or postgresql://...; default sqlite:///<data_dir>/coordination.db."""
    shards: int = Field(d.SHARDS, ge=1, le=1024)
    """Origin shards: one Dagster partition per (cycle, shard)."""
    politeness: Politeness = Field(default_factory=Politeness)
    """Per-origin pacing."""
    scope: Scope = Field(default_factory=Scope)
    """What may be crawled."""
    limits: Limits = Field(default_factory=Limits)
    """Per-fetch bounds."""
    robots: Robots = Field(default_factory=Robots)
    """robots.txt handling."""
    render: Render = Field(default_factory=Render)
    """The render lane (headless Chromium) for pages whose text a script draws."""
    regions: Regions = Field(default_factory=Regions)
    """Several regions sharing origins through ownership leases (off by default)."""
    url_identity: UrlIdentity = Field(default_factory=UrlIdentity)
    """Tracking parameters dropped from URLs, per origin if need be."""
    indexer: Indexer = Field(default_factory=Indexer)
    """Indexer delivery."""
    dedupe: Dedupe = Field(default_factory=Dedupe)
    """Near-duplicate clustering."""
    discovery: Discovery = Field(default_factory=Discovery)
    """Sitemaps, partner feed, path-ascending discovery."""
    dns: Dns = Field(default_factory=Dns)
    """DNS cache of the egress gate."""
    resolve: dict[str, str] = Field(default_factory=dict)
    """Host -> IP map (like curl --resolve); the only way a crawl may reach a non-public address."""
    resolve_only: bool = False
    """Refuse every host not in `resolve` (no DNS at all): for sandboxes and tests."""
    revisit_interval_s: float = Field(d.REVISIT_INTERVAL_S, gt=0)
    """A fetched page is due again after this long until it has a change history."""
    recrawl: Recrawl = Field(default_factory=Recrawl)
    """Adaptive revisit schedule and the refresh/discovery budget split."""
    freshness: Freshness = Field(default_factory=Freshness)
    """Freshness targets per priority class and the cycle schedule."""
    retention: Retention = Field(default_factory=Retention)
    """How long raw bodies and document versions are kept."""
    extraction_workers: int = Field(0, ge=0, le=64)
    """Extraction processes; 0 = one per CPU core."""

    @field_validator("user_agent")
    @classmethod
    def _ua_has_token(cls, ua: str) -> str:
        # RFC 9309 2.2.1: robots.txt groups name a product token [a-zA-Z_-]+, matched whole;
        # "Bot2000" or "Bötli" would match no group (or another crawler's), so refuse it here.
        ua = ua.strip()
        name = ua.split("/", 1)[0].strip(" \t")
        if not name:
            raise ValueError("must start with a product token, e.g. 'AtlasBot/1.0'")
        if crawler_token(ua) is None:
            raise ValueError(
                f"product token {name!r} must be letters, '_' or '-' (RFC 9309 2.2.1), "
                "e.g. 'AtlasBot/1.0'"
            )
        if any((ch < " " and ch != "\t") or ch == "\x7f" for ch in ua):
            raise ValueError("must be one line without control characters (an HTTP header)")
        return ua

    @field_validator("lake_root")
    @classmethod
    def _lake_root(cls, root: str | None) -> str | None:
        if not root:
            return None
        parts = urlsplit(root)
        if len(parts.scheme) > 1 and parts.scheme not in LAKE_SCHEMES:
            raise ValueError(f"unknown scheme {parts.scheme!r}: use a local folder, "
                             "s3://bucket/prefix, gs://bucket/prefix or az://container/prefix")  # fmt: skip
        if len(parts.scheme) > 1 and parts.scheme != "file":
            if not parts.netloc:
                raise ValueError(f"{root!r} names no bucket: write {parts.scheme}://bucket/prefix")
            if parts.query:
                raise ValueError("no ?options in lake_root: put them in lake_storage_options")
        return root.rstrip("/") or root

    @field_validator("bodies_url")
    @classmethod
    def _object_store(cls, url: str | None) -> str | None:
        if url and urlsplit(url).scheme not in ("s3", "gs", "gcs", "hdfs", "file", "abfs"):
            raise ValueError("use s3://bucket/prefix, gs://bucket/prefix (or file:///path)")
        return url

    @field_validator("seeds")
    @classmethod
    def _seed_urls(cls, seeds: list[str]) -> list[str]:
        for i, seed in enumerate(seeds):
            try:
                check_seed(seed)
            except ValueError as exc:
                raise ValueError(f"seeds[{i}]: {exc}") from None
        return seeds

    @field_validator("resolve")
    @classmethod
    def _resolve_ips(cls, mapping: dict[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for host, ip in mapping.items():
            try:
                ipaddress.ip_address(str(ip))
            except ValueError:
                raise ValueError(f"{host}: {ip!r} is not an IP address") from None
            out[str(host).strip().lower().rstrip(".")] = str(ip)
        return out

    @field_validator("coordination_url")
    @classmethod
    def _coordination_scheme(cls, url: str | None) -> str | None:
        if url is not None and urlsplit(url).scheme not in {"sqlite", "postgresql", "postgres"}:
            raise ValueError("must start with sqlite:/// or postgresql://")
        return url

    @model_validator(mode="after")
    def _lease_outlives_request(self) -> CrawlConfig:
        if self.politeness.max_in_flight > self.politeness.global_concurrency:
            raise ValueError("politeness.max_in_flight cannot exceed politeness.global_concurrency")
        return self

    # derived values ---------------------------------------------------------------
    @property
    def robots_token(self) -> str:
        """The product token robots.txt groups are matched against (e.g. 'AtlasBot'): the
        user agent's name before '/', an RFC 9309 2.2.1 identifier (checked on load)."""
        token = crawler_token(self.user_agent)
        if token is None:  # only a model built without validation gets here
            raise ValueError(f"user_agent {self.user_agent!r} has no valid product token")
        return token

    @property
    def lake_uri(self) -> str:
        """The lake root as deltalake opens it: an absolute folder or an object-store URI."""
        return self.lake_root or str(self.data_dir / "lake")

    @property
    def lake_is_local(self) -> bool:
        return len(urlsplit(self.lake_uri).scheme) <= 1

    @property
    def lake_options(self) -> dict[str, str] | None:
        return dict(self.lake_storage_options) or None

    @property
    def lake_path(self) -> Path:
        """The folder of a local lake (an object-storage lake has none)."""
        if not self.lake_is_local:
            raise ConfigError(f"lake_root {self.lake_uri} is object storage, not a folder")
        uri = self.lake_uri
        return Path(urlsplit(uri).path if uri.startswith("file:") else uri)

    @property
    def reports_dir(self) -> Path:
        """HTML reports: next to the tables of a local lake, else under data_dir."""
        return self.lake_path / "reports" if self.lake_is_local else self.data_dir / "reports"

    @property
    def bodies_path(self) -> Path:
        return self.bodies_dir or self.data_dir / "bodies"

    @property
    def coordination(self) -> str:
        return self.coordination_url or f"sqlite:///{self.data_dir / 'coordination.db'}"

    @property
    def control_plane(self) -> str:
        url = self.regions.control_plane_url
        return url or f"sqlite:///{self.data_dir / 'control_plane.db'}"

    @property
    def lease_s(self) -> float:
        return self.limits.total_timeout_s + self.limits.lease_margin_s

    @property
    def seed_hosts(self) -> list[str]:
        return sorted({host_of(normalize(s)) for s in self.seeds})

    def tracking_policy(self) -> TrackingPolicy:
        """The tracking lists of url_identity, ready for normalize()."""
        ident = self.url_identity
        base = TrackingParams(
            frozenset(p.lower() for p in ident.tracking_params), tuple(ident.tracking_prefixes)
        )
        per_origin = {
            o: base.amended(v.add, v.add_prefixes, v.keep) for o, v in ident.per_origin.items()
        }
        try:
            return TrackingPolicy(base, per_origin)
        except BadUrl as exc:
            raise ConfigError(
                f"url_identity.per_origin: {exc}; keys are origins such as https://shop.example"
            ) from None

    @property
    def scope_hosts(self) -> frozenset[str]:
        return frozenset(self.scope.allowed_hosts or self.seed_hosts)


def _check_cron(cron: str) -> str:
    # the shape only (five fields); Dagster checks the values when the schedule loads
    if not re.fullmatch(r"\s*(?:[\w*/,?-]+\s+){4}[\w*/,?-]+\s*", cron):
        raise ValueError(f"{cron!r} is not a cron expression such as '0 */6 * * *'")
    return cron


def _check_http_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL with a host")


def check_seed(seed: str) -> None:
    """ValueError unless `seed` is a URL the crawl can queue: http(s), a host, no
    credentials, and one that normalizes (a valid host and port), the same test a link
    passes, so a bad seed fails when the config loads rather than mid-crawl."""
    if has_userinfo(seed):  # checked first: no message may repeat the credentials
        raise ValueError(
            f"seed {redact_userinfo(seed)!r} names a user or password (user:password@"
            "host): refused, as credentials are never stored or sent; remove them"
        )
    try:
        _check_http_url(seed)
    except ValueError as exc:
        raise ValueError(f"seed {exc}") from None
    try:
        normalize(seed)
    except BadUrl as exc:
        raise ValueError(
            f"seed {seed!r} is not a URL Atlas can fetch ({exc}); fix or remove it"
        ) from None


def _format_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    if first["type"] == "extra_forbidden":
        parent = CrawlConfig
        for part in first["loc"][:-1]:
            field = parent.model_fields.get(str(part))
            ann = field.annotation if field else None
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                parent = ann  # type: ignore[assignment]
        known = list(parent.model_fields)
        near = difflib.get_close_matches(str(first["loc"][-1]), known, n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else f" (known keys: {', '.join(known)})"
        return f"{source}: unknown key '{loc}'{hint}"
    msg = str(first["msg"]).removeprefix("Value error, ")
    got = first.get("input")
    shown = "" if isinstance(got, dict | list) or got is None else f" (got {got!r})"
    return f"{source}: {loc}: {msg}{shown}"


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"config file {path} does not exist; set ATLAS_CONFIG or pass --config"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(
            f"{path}:{where} is not valid YAML ({getattr(exc, 'problem', exc)})"
        ) from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{path}: the top level must be a mapping of keys, not {type(raw).__name__}"
        )
    return raw


def _read_seeds_file(path: Path) -> list[str]:
    """The file's seeds; a bad one fails in one line naming the file and its line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"seeds_file {path}: cannot read it ({exc.strerror})") from None
    seeds = []
    for n, line in enumerate(lines, 1):
        seed = line.strip()
        if not seed or seed.startswith("#"):
            continue
        try:
            check_seed(seed)
        except ValueError as exc:
            raise ConfigError(f"seeds_file {path}:{n}: {exc}") from None
        seeds.append(seed)
    return seeds


def _anchor(path: Path | None, base: Path) -> Path | None:
    if path is None:
        return None
    return path if path.is_absolute() else (base / path).resolve()


def _anchor_lake(root: str | None, base: Path) -> str | None:
    """A local lake root anchored at the config's folder; an object-store URI as it is."""
    if root is None or len(urlsplit(root).scheme) > 1:
        return root
    return str(_anchor(Path(root).expanduser(), base))


def _anchor_sqlite(url: str | None, base: Path) -> str | None:
    if url is None or not url.startswith("sqlite:///"):
        return url
    rest = url.removeprefix("sqlite:///")
    return url if rest.startswith("/") else f"sqlite:///{(base / rest).resolve()}"


def config_from_mapping(
    raw: Mapping[str, Any], *, base_dir: Path, source: str = "config", env: Mapping[str, str] = {}
) -> CrawlConfig:
    """Validate a mapping (parsed YAML) into a CrawlConfig; raise ConfigError in one line."""
    data = dict(raw)
    if env.get(ENV_DATA_DIR):
        data["data_dir"] = env[ENV_DATA_DIR]
    try:
        cfg = CrawlConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, source)) from None
    seeds = list(cfg.seeds)
    seeds_file = _anchor(cfg.seeds_file, base_dir)
    if seeds_file is not None:
        try:
            extra = _read_seeds_file(seeds_file)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
        seeds += [s for s in extra if s not in seeds]
    return cfg.model_copy(
        update={
            "seeds": seeds,
            "seeds_file": seeds_file,
            "data_dir": _anchor(cfg.data_dir, base_dir),
            "lake_root": _anchor_lake(cfg.lake_root, base_dir),
            "bodies_dir": _anchor(cfg.bodies_dir, base_dir),
            "coordination_url": _anchor_sqlite(cfg.coordination_url, base_dir),
            "discovery": cfg.discovery.model_copy(
                update={"feed_file": _anchor(cfg.discovery.feed_file, base_dir)}
            ),
            "regions": cfg.regions.model_copy(
                update={
                    "control_plane_url": _anchor_sqlite(cfg.regions.control_plane_url, base_dir)
                }
            ),
        }
    )


def load_config(path: str | Path | None = None, env: Mapping[str, str] = {}) -> CrawlConfig:
    """Load the crawl config from `path`, else $ATLAS_CONFIG, else the embedded defaults, with
    the `key=value` overrides of $ATLAS_SET (a JSON list; `atlas crawl -s` sets it, so the
    runs it submits load the same config) applied over it."""
    chosen = path or env.get(ENV_CONFIG)
    overrides = parse_overrides(env.get(ENV_SET))
    if not chosen:
        raw: dict[str, Any] = {}
        base, source = Path.cwd(), "defaults"
    else:
        file = Path(chosen).expanduser()
        raw, base, source = _read_yaml(file), file.resolve().parent, str(file)
    if overrides:
        raw = apply_overrides(raw, overrides)
        source += " with -s " + " -s ".join(overrides)
    return config_from_mapping(raw, base_dir=base, source=source, env=env)


def parse_overrides(raw: str | None) -> list[str]:
    if not raw:
        return []
    try:
        items = json.loads(raw)
    except ValueError:
        items = None
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ConfigError(f'{ENV_SET} must be a JSON list of "key=value" strings, not {raw!r}')
    return items


def apply_overrides(raw: Mapping[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`raw` with each `dotted.key=value` set (the value read as YAML: numbers, booleans,
    lists and mappings as in the file). Unknown keys and bad values are then reported by the
    config's own validation, naming the key."""
    out = copy.deepcopy(dict(raw))
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"-s {item!r}: write -s key=value, e.g. -s politeness.min_gap_s=2")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError as exc:
            raise ConfigError(f"-s {item!r}: the value is not valid YAML ({exc})") from None
        node = out
        *parents, leaf = key.split(".")
        for i, part in enumerate(parents):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                where = ".".join(parents[: i + 1])
                raise ConfigError(f"-s {item!r}: {where} is a value, not a section")
            node = child
        node[leaf] = value
    return out


def dump_config(cfg: CrawlConfig) -> str:
    """The config as YAML, every key spelled out (what a run actually used)."""
    return str(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))


def config_reference() -> list[tuple[str, str, str]]:
    """(dotted key, default, one-line doc) for every knob: the README table is made from it."""
    rows: list[tuple[str, str, str]] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
                continue
            default = field.get_default(call_default_factory=True)
            shown = "null" if default is None else yaml.safe_dump(
                default if not isinstance(default, Path) else str(default),
                default_flow_style=True).strip().removesuffix("...").strip()  # fmt: skip
            rows.append((prefix + name, shown, (field.description or "").strip()))

    walk(CrawlConfig, "")
    return rows
