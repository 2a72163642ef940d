"""The scope guard: turns the links of a page into reason-coded link rows and candidates."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from .config import CrawlConfig, check_seed
from .coordination import Candidate, UrlState
from .egress import EgressGate
from .errors import ConfigError, EgressRefused
from .reasons import Reason
from .robots import RobotsPolicy
from .sitemaps import Sitemap
from .traps import page_number, repeats_segments, strip_session_ids
from .url_rules import UrlRules
from .urls import (
    BadUrl,
    UncrawlableScheme,
    UserinfoRefused,
    normalize,
    origin_of,
    redact_userinfo,
    registrable_domain,
    shard_of,
)

# what `_canonical` and `_verdict` remember, each (cleared when full). Measured on the
# sandbox's 10k-page web (crawl_throughput): 38k distinct hrefs by folder (tracking
# variants, relative paths) and 17k URLs; at 16,384 both memos were cleared over and over,
# normalizing 48.6k hrefs instead of 38.3k and judging 25.0k URLs instead of 17.5k (0.18
# against 0.13 ms a page). They then held 14 MB (38k + 17k + 10k entries); all three full,
# some 40 MB.
_MEMO_ENTRIES = 65536
K = TypeVar("K")
V = TypeVar("V")


def _keep(memo: dict[K, V], key: K, value: V) -> V:
    """Remember `value` under `key` in one of the guard's memos and return it; a full memo
    starts over, so each holds at most _MEMO_ENTRIES answers."""
    if len(memo) >= _MEMO_ENTRIES:
        memo.clear()
    memo[key] = value
    return value


# first characters of an href that is a relative path (RFC 3986 4.2) whatever its cleaning:
# no scheme (checked first), no '/', '?', '#', backslash, space or control character
_PATH_START = frozenset(string.ascii_letters + string.digits + "-._~%!$&'()*+,;=")


def _folder(base: str) -> str | None:
    """`base` up to the last '/' of its path (query and fragment dropped), or None when it
    has no path to merge with (RFC 3986 5.2.3: then the merge starts at '/')."""
    cut = base.split("#", 1)[0].split("?", 1)[0]
    start = cut.find("://")
    if start < 0 or cut.find("/", start + 3) < 0:
        return None
    return cut[: cut.rfind("/") + 1]


def _root(base: str) -> str:
    """`base`'s scheme://authority, what a root-relative href is resolved against."""
    return "/".join(base.split("/", 3)[:3])


def _base_keys(base: str) -> tuple[str, str | None]:
    """What `ScopeGuard._canonical` remembers a relative href under: the base's
    scheme://authority (for a root-relative href) and its folder (for a relative path)."""
    return _root(base), _folder(base)


_ADMITTED, _ROBOTS_DISALLOWED = Reason.ADMITTED.value, Reason.ROBOTS_DISALLOWED.value
_ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")  # an href with a scheme (RFC 3986 3.1)


def priority_for_depth(depth: int) -> float:
    """Breadth-first by default: shallower pages first."""
    return max(0.05, 1.0 - 0.1 * depth)


def priority_from_hints(
    depth: int, rated: float | None, lastmod: float | None, now: float
) -> float:
    """A sitemap entry's priority: half its depth's, half the site's own <priority> rating
    (0.5 when unrated, as the protocol says), plus a little when <lastmod> is recent."""
    score = 0.5 * priority_for_depth(depth) + 0.5 * (0.5 if rated is None else rated)
    if lastmod is not None and now - lastmod < RECENT_S:
        score += 0.1
    return round(min(score, 1.0), 4)


RECENT_S = 7 * 86_400.0  # a <lastmod> this recent raises an entry's priority
CANONICAL_PRIORITY = 0.95  # a URL a page names as its rel=canonical is queued this high


@dataclass(frozen=True, slots=True)
class Judgement:
    url: str | None  # canonical, None when it cannot be one
    reason: str
    candidate: Candidate | None
    session_id_stripped: bool = False  # `url` lost a session id the href carried

    @staticmethod
    def stored_href(href: str) -> str:
        """The href as a link row stores it: a user:password@ (refused, whatever else is wrong
        with the link, e.g. ftp://u:p@host/) becomes ***@; anything else as found."""
        return redact_userinfo(href) if "@" in href else href


def parent_paths(url: str) -> list[str]:
    """Path-ascending discovery: /a/b/c -> /a/b/, /a/ (the root is a seed's job)."""
    parts = urlsplit(url)
    segs = [s for s in parts.path.split("/") if s]
    base = f"{parts.scheme}://{parts.netloc}"
    return ["/".join([base, *segs[:n]]) + "/" for n in range(len(segs) - 1, 0, -1)]


def read_feed(path: Path | None) -> list[tuple[str, float | None]]:
    """A partner feed: one URL a line, optionally a tab and a priority (0-1); # comments."""
    if path is None:
        return []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"discovery.feed_file {path}: {exc}; fix or remove the path") from None
    out: list[tuple[str, float | None]] = []
    for n, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
        if not text:
            continue
        url, _, rated = text.partition("\t")
        try:
            priority = float(rated) if rated.strip() else None
        except ValueError:
            raise ConfigError(f"{path}:{n}: priority {rated!r} is not a number") from None
        if priority is not None and not 0.0 <= priority <= 1.0:
            raise ConfigError(f"{path}:{n}: priority {priority} is not between 0 and 1")
        try:
            check_seed(url.strip())
        except ValueError as exc:
            raise ConfigError(f"{path}:{n}: {exc}") from None
        out.append((url.strip(), priority))
    return out


class ScopeGuard:
    """Applies the config's scope rules (scheme, hosts, URL rules, depth, length, nofollow,
    robots)."""

    def __init__(self, cfg: CrawlConfig) -> None:
        self.cfg = cfg
        self.hosts = cfg.scope_hosts
        self.tracking = cfg.tracking_policy()
        self.domains = frozenset(cfg.scope.allowed_domains)
        self.session_params = frozenset(cfg.scope.session_params)
        self.page_params = frozenset(cfg.scope.page_params)
        self.gate = EgressGate(cfg.resolve, cfg.resolve_only)
        self.rules = UrlRules([r.rule() for r in cfg.scope.url_rules])
        self._canonicals: dict[tuple[str, str], tuple[str | None, str | None, bool]] = {}
        self._sites: dict[str, tuple[str, int, str | None, str | None]] = {}
        self._verdicts: dict[str, tuple[str, int, str | None]] = {}
        self._allowed: dict[tuple[RobotsPolicy, str], bool] = {}

    def judge(
        self,
        href: str,
        base: str,
        depth: int,
        source: str | None,
        nofollow: bool = False,
        robots: RobotsPolicy | None = None,
    ) -> Judgement:
        """Decide one link found at `depth` on `source` (resolved against `base`)."""
        url, rejected, stripped = self._canonical(href, base)
        if rejected is not None:
            return Judgement(url, rejected, None)
        assert url is not None
        reason, cand = self._decide(url, href, depth, priority_for_depth(depth), source,
                                    nofollow, robots)  # fmt: skip
        return Judgement(url, reason, cand, stripped)

    def _canonical(
        self, href: str, base: str, keys: tuple[str, str | None] | None = None
    ) -> tuple[str | None, str | None, bool]:
        """(canonical URL, rejection reason, session id stripped) of `href` on `base`,
        remembered: a page's navigation links recur on every page of its site, and
        normalizing was a third of the fetch loop's CPU. An href with a scheme does not
        depend on the base, a root-relative one only on its origin, a relative path only on
        the base's directory (RFC 3986 5.2.2-5.2.3: merged with the base path up to its last
        '/', the base's query dropped), so the pages of one folder share their links. `keys`
        is `_base_keys(base)` when a page's links share it; a single href (a seed, a sitemap
        entry, a redirect: mostly absolute) works out only what it needs."""
        if _ABSOLUTE.match(href):
            key = (href, "")
        elif href.startswith("/") and not href.startswith("//"):
            key = (href, keys[0] if keys else _root(base))
        elif href[:1] in _PATH_START and (folder := keys[1] if keys else _folder(base)):
            key = (href, folder)
        else:
            key = (href, base)
        found = self._canonicals.get(key)
        if found is None:
            found = _keep(self._canonicals, key, self._canonical_of(href, base))
        return found

    def _canonical_of(self, href: str, base: str) -> tuple[str | None, str | None, bool]:
        try:
            url = normalize(href, base, self.tracking)
        except UserinfoRefused:  # before anything could keep, send or silently drop it
            return None, Reason.USERINFO.value, False
        except BadUrl as exc:
            bad_scheme = isinstance(exc, UncrawlableScheme)
            rejected = Reason.SCHEME_NOT_ALLOWED if bad_scheme else Reason.BAD_URL
            return None, rejected.value, False
        if len(url) > self.cfg.scope.max_url_length:
            return url, Reason.URL_TOO_LONG.value, False
        stripped = strip_session_ids(url, self.session_params)
        return stripped, None, stripped != url

    def _decide(
        self,
        url: str,
        href: str,
        depth: int,
        priority: float,
        source: str | None,
        nofollow: bool,
        robots: RobotsPolicy | None,
    ) -> tuple[str, Candidate | None]:
        """The scope rules past normalization, for `url` (canonical, session ids stripped):
        (reason, candidate) with `priority` that of `depth`. Tuples, not a Judgement: this
        runs for every link of every page, on the fetch loop."""
        origin, shard, rejected = self._verdict(url)
        if rejected is not None:
            return rejected, None
        if depth > self.cfg.scope.max_depth:
            return Reason.MAX_DEPTH.value, None
        if nofollow and not self.cfg.scope.follow_nofollow:
            return Reason.NOFOLLOW.value, None
        state, reason, version = UrlState.ELIGIBLE, _ADMITTED, None
        # Only this page's own origin has its policy at hand; others are checked at claim time.
        if robots is not None and robots.origin == origin and not self._robots_allow(robots, url):
            state, reason, version = UrlState.BLOCKED, _ROBOTS_DISALLOWED, robots.version
        return reason, Candidate(url, href, origin, shard, depth, priority, source, state, reason,
                                 version)  # fmt: skip

    def _robots_allow(self, robots: RobotsPolicy, url: str) -> bool:
        """`robots.allows` for this crawler, remembered per policy (its whole value: an equal
        policy answers alike) and URL: a page's navigation links are on every page of its
        origin, and matching them again was the largest part of judging a link."""
        key = (robots, url)
        found = self._allowed.get(key)
        if found is None:
            found = _keep(self._allowed, key, robots.allows(url, self.cfg.robots_token))
        return found

    def _verdict(self, url: str) -> tuple[str, int, str | None]:
        """(origin, shard, rejection) of a canonical URL by the rules that depend on it
        alone, remembered: a site's navigation links are judged again on every page of it,
        and the URL rules and trap checks (a split and three regexes) were a third of
        judging a link."""
        found = self._verdicts.get(url)
        if found is None:
            found = _keep(self._verdicts, url, self._verdict_of(url))
        return found

    def _verdict_of(self, url: str) -> tuple[str, int, str | None]:
        """`_verdict` worked out, in this order: allowed hosts, URL rules, stateless trap
        checks, the egress gate's static half."""
        origin, shard, host_refused, egress_refused = self._site(url)
        if host_refused is not None:
            return origin, shard, host_refused
        if self.rules:
            decided = self.rules.decide(url, origin)
            if decided is not None and decided.denied:
                return origin, shard, Reason.URL_RULE_DENIED.value
        trap = self._trap(url)
        if trap is not None:
            return origin, shard, trap
        return origin, shard, egress_refused

    def _site(self, url: str) -> tuple[str, int, str | None, str | None]:
        """(origin, shard, host refusal, egress refusal) of a canonical URL: functions of its
        scheme://authority alone, remembered per site. Remembering them per URL missed on
        every new URL, and a crawl has far more URLs than the memo holds (a fifth of the
        fetch loop on a 100k-page web went to parsing hosts again). A canonical URL's path
        starts with '/' and has no raw backslash, so no parser reads a host out of it."""
        cut = url.find("/", url.find("://") + 3)
        site = url[:cut] if cut >= 0 else url.partition("#")[0].partition("?")[0]
        found = self._sites.get(site)
        if found is None:
            found = _keep(self._sites, site, self._site_of(f"{site}/"))
        return found

    def _site_of(self, url: str) -> tuple[str, int, str | None, str | None]:
        origin = origin_of(url)
        shard = shard_of(origin, self.cfg.shards)
        host = origin.split("://", 1)[1].rsplit(":", 1)[0]
        if host not in self.hosts and not (
            self.domains and registrable_domain(host) in self.domains
        ):
            return origin, shard, Reason.HOST_NOT_ALLOWED.value, None
        try:
            # the gate's static half (no DNS): a non-public literal or, in resolve_only mode,
            # an unmapped name never becomes work; names are judged again when resolved
            self.gate.check_url(url)
        except EgressRefused:
            return origin, shard, None, Reason.EGRESS_REFUSED.value
        return origin, shard, None, None

    def _trap(self, url: str) -> str | None:
        """The stateless trap checks (the store applies the counting caps)."""
        page = page_number(url, self.page_params)
        if page is not None and page > self.cfg.scope.max_page_number:
            return Reason.PAGINATION_CAP.value
        if repeats_segments(urlsplit(url).path, self.cfg.scope.max_repeated_segments):
            return Reason.REPEATING_PATH.value
        return None

    def seed_candidates(self) -> list[Candidate]:
        """Seeds, configured sitemaps and the partner feed's URLs (with their priorities)."""
        out = []
        for seed in self.cfg.seeds:
            j = self.judge(seed, seed, 0, None)
            if j.candidate is not None:
                out.append(replace(j.candidate, reason=Reason.SEED.value, source="seed"))
        out += self.announced_sitemaps(self.cfg.discovery.sitemaps, "config")
        for url, rated in read_feed(self.cfg.discovery.feed_file):
            j = self.judge(url, url, 0, None)
            if j.candidate is not None:
                priority = j.candidate.priority if rated is None else rated
                out.append(replace(j.candidate, priority=priority, source="feed"))
        return out

    def announced_sitemaps(self, urls: list[str], source: str) -> list[Candidate]:
        """Sitemaps named in robots.txt or the config, as queued work of kind "sitemap"."""
        out = []
        for url in urls:
            j = self.judge(url, url, 0, source)
            if j.candidate is not None:
                out.append(replace(j.candidate, kind="sitemap", priority=1.0))
        return out

    def sitemap_entries(
        self, sitemap: Sitemap, base: str, depth: int, now: float
    ) -> list[tuple[dict[str, Any], Candidate | None]]:
        """One link row per entry of a sitemap (kind "sitemap"), with its candidate."""
        out: list[tuple[dict[str, Any], Candidate | None]] = []
        for entry in sitemap.entries:
            j = self.judge(entry.loc, base, depth + 1, base)
            cand = j.candidate
            if cand is not None:
                kind = "sitemap" if sitemap.is_index else "page"
                rated = priority_from_hints(depth + 1, entry.priority, entry.lastmod, now)
                cand = replace(cand, kind=kind, priority=1.0 if sitemap.is_index else rated)
            row = {"href": j.stored_href(entry.loc), "url": j.url,
                   "target_origin": cand.origin if cand else None, "anchor": "",
                   "nofollow": False, "depth": depth + 1, "reason": j.reason, "kind": "sitemap",
                   "session_id_stripped": j.session_id_stripped}  # fmt: skip
            out.append((row, cand))
        return out

    def page_links(
        self,
        links: list[tuple[str, str, bool]],
        base: str,
        source: str,
        depth: int,
        robots: RobotsPolicy | None,
        canonical: str | None = None,
    ) -> list[tuple[dict[str, Any], Candidate | None]]:
        """One row per distinct target of a page (first occurrence), with its candidate. A
        rel=canonical target comes first, as a hint: recorded (kind "canonical") and queued
        with a raised priority, never merged with this page on its say-so."""
        seen: set[str] = set()
        out: list[tuple[dict[str, Any], Candidate | None]] = []
        found = [(canonical, "", False, "canonical")] if canonical else []
        found += [(href, anchor, nofollow, "link") for href, anchor, nofollow in links]
        if self.cfg.discovery.path_ascending:
            found += [(parent, "", False, "ascend") for parent in parent_paths(source)]
        # what every link of the page shares, worked out once (a page has dozens of links)
        keys, child, priority = _base_keys(base), depth + 1, priority_for_depth(depth + 1)
        for href, anchor, nofollow, kind in found:
            url, reason, stripped = self._canonical(href, base, keys)
            cand = None
            if reason is None:
                assert url is not None
                reason, cand = self._decide(url, href, child, priority, source, nofollow, robots)
            key = url or href
            if key in seen or (kind == "canonical" and key == source):  # self-canonical: no news
                continue
            seen.add(key)
            if kind == "canonical" and cand is not None:
                cand = replace(cand, priority=max(cand.priority, CANONICAL_PRIORITY))
            row = {
                "href": Judgement.stored_href(href),
                "url": url,
                "target_origin": cand.origin if cand else None,
                "anchor": anchor,
                "nofollow": nofollow,
                "depth": child,
                "reason": reason,
                "kind": kind,
                "session_id_stripped": stripped,
            }
            out.append((row, cand))
        return out
