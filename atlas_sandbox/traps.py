"""Trap origins: URL spaces without end, one page under many spellings, and pages only
sitemaps or a feed name, on loopback (`atlas web --traps [--trap-scale N]`).

Every extent marked "x N" grows with the trap scale N (default 1), so a crawl can show its
`urls` table does not grow when a trap is made ten times deeper.

calendar.example.test  (spaces that never end)
  /calendar/YYYY/MM     a month within 120 x N months of June 2024, linking the previous and
                        next month and its day pages; months outside the range answer 404
  /calendar/YYYY/MM/DD  a day page, linking its month and the previous and next day
  /forever/YYYY/MM      any month of any year from 0001 on: previous and next, really forever
  /list?page=N          pages 1..500 x N, each linking the next but the last
  /stream?page=N        every page N >= 1 links page N+1: pagination that never ends
  /a/, /a/a/, ...       a relative link 'a/' on every page; 200 up to 50 x N segments, then 404
shop.example.test  (one page, many URLs)
  /product/1..24        the real pages; each links related products with ?sid=<new each page
                        view> and ;jsessionid=<new each page view>, which answer as the plain page
  /shop?color=C&size=S&sort=O&page=P
                        faceted listings: 6 x N colours, 5 x N sizes, 3 orders, 4 x N pages; each
                        links every listing one facet away, so the combinations explode
  /promo                links to products carrying utm_*, gclid and fbclid (one keeps a real
                        parameter between them)
  /spellings            upper- and mixed-case scheme and host with the explicit port, a fragment,
                        dot segments (/a/./b/../c), percent-encoded unreserved characters, './',
                        an empty path
  /help/sizes/chart     '../' relative links, one climbing above the root
  /base/absolute        <base href="http://shop.example.test:PORT/catalog/">; its relative links
                        resolve to real pages only against the base (against the page: 404)
  /base/rooted          the same with a root-relative <base href="/guide/">
catalogue.example.test  (filters combined in any order; not in TRAP_HOSTS: see CATALOGUE_HOSTS)
  /, /range/2..N        the A to Z of the range, 40 items a page, each page linking the
                        next (so items past the first 40 lie deeper than the listings)
  /item/1..40 x N       the real pages: each links the next two items, two one-filter
                        listings ("more in this colour", "more in this material") and its
                        five-filter one ("the whole look", keys in an order of its own)
  /catalogue?K=V&...    listings by up to five filters (colour, size, material, fit, season),
                        keys in any order: each links every listing one filter more (the new
                        key inserted at a varying place) or one fewer. Every listing shows the
                        same six bestsellers (they come in every colour, size, ...) and the
                        same filter panel text, so a listing's text never changes: the filters
                        only change its URL. 4^5 - 1 filter sets, ~40,000 URLs with the orders
feeds.example.test  (discovery beyond links)
  /robots.txt           Disallow: /private/; Sitemap: /sitemap-index.xml and /sitemap-3.xml.gz
  /sitemap-index.xml    a sitemap index of /sitemap-1.xml and /sitemap-2.xml.gz, with <lastmod>
  /sitemap-1.xml        the home page, /about, articles (most linked from no page) and
                        /private/report, which robots.txt disallows
  /sitemap-2.xml.gz     gzip bytes served as application/gzip (no Content-Encoding): stories
  /sitemap-3.xml.gz     the same served as application/x-gzip: notes
  (no URL)              write_partner_feed(): a partner feed file, one URL a line with an
                        optional tab-separated priority, naming /partner/ pages nothing else names

Sitemap entries carry <lastmod> (date or date-time) and <priority>, each left out on some
entries as real sitemaps do. No link spells an explicit default port: ":80" would point at a
port the sandbox does not serve on loopback, so spellings carry the sandbox's own port.

Robots allow everything on calendar. and shop.; only feeds. disallows a path, so a sitemap
can name a page the crawler must still not fetch. The shop routes a request the way common
servers do (path parameters dropped, percent-decoded, dot segments removed), so every spelling
a client sends reaches the page it names. Everything is a pure function of (path, port, scale)
except the session ids, which come from a per-server view counter: a fresh id on each view,
the same sequence in every run.
"""

from __future__ import annotations

import calendar
import gzip
import hashlib
import itertools
import math
import random
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from urllib.parse import parse_qsl, unquote

CALENDAR = "calendar.example.test"
SHOP = "shop.example.test"
FEEDS = "feeds.example.test"
TRAP_HOSTS: tuple[str, ...] = (CALENDAR, SHOP, FEEDS)
"""Trap origin hosts: map these to loopback in a crawl's `resolve` and allow them in its scope."""
CATALOGUE = "catalogue.example.test"
CATALOGUE_HOSTS: tuple[str, ...] = (CATALOGUE,)
"""The combined-filter catalogue, served with the trap origins but kept out of TRAP_HOSTS and
seed_urls(): its real pages grow with the scale, and the other origins' crawls assert that a
deeper trap adds no URL."""

DEFAULT_TRAP_SCALE = 1
MAX_TRAP_SCALE = 100  # the calendar then spans 1024-3024: years keep four digits

CALENDAR_ANCHOR = (2024, 6)  # (year, month) the calendar is centred on; the index links it
CALENDAR_MONTHS_EACH_WAY = 120  # months either side of the anchor, x scale
LIST_PAGES = 500  # /list pages, x scale
REPEAT_DEPTH = 50  # /a/ segments served, x scale

SHOP_PRODUCTS = 24  # /product/1..24
FACET_COLORS: tuple[str, ...] = ("red", "blue", "green", "black", "white", "grey")  # x scale
FACET_SIZES: tuple[str, ...] = ("xs", "s", "m", "l", "xl")  # x scale
FACET_SORTS: tuple[str, ...] = ("price", "name", "newest")  # orders do not grow with scale
FACET_PAGES = 4  # listing pages per filter combination, x scale
FACET_KEYS: tuple[str, ...] = ("color", "size", "sort", "page")
LISTING_PRODUCTS = 6  # products shown on one listing

SESSION_PARAMS: tuple[str, ...] = ("sid", "jsessionid")
"""Session-id names the shop's links carry: ``?sid=`` and the ``;jsessionid=`` path parameter."""

TRACKING_PARAMS: tuple[str, ...] = (
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_content",
    "gclid",
    "fbclid",
)
"""Tracking parameters the promo page's links carry (all on the crawler's default list)."""

SITEMAP_INDEX = "/sitemap-index.xml"
SITEMAP_PATHS: tuple[str, ...] = ("/sitemap-1.xml", "/sitemap-2.xml.gz", "/sitemap-3.xml.gz")
ANNOUNCED_SITEMAPS: tuple[str, ...] = (SITEMAP_INDEX, "/sitemap-3.xml.gz")
"""Sitemaps feeds.example.test's robots.txt names; the index names the other two."""
GZIP_SITEMAP_TYPES: dict[str, str] = {
    "/sitemap-2.xml.gz": "application/gzip",  # RFC 6713
    "/sitemap-3.xml.gz": "application/x-gzip",  # what many servers still send
}
FEEDS_DISALLOWED = "/private/"

Answer = tuple[int, dict[str, str], bytes]

_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_XML = "application/xml; charset=utf-8"
_SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
CATALOGUE_ITEMS = 40  # /item/1..40, x scale
CATALOGUE_LISTING = "/catalogue"
CATALOGUE_FILTERS: dict[str, tuple[str, ...]] = {
    "colour": ("red", "blue", "green"),
    "size": ("s", "m", "l"),
    "material": ("cotton", "linen", "wool"),
    "fit": ("slim", "regular", "loose"),
    "season": ("summer", "winter", "all-year"),
}
"""The five filters and their values (they do not grow with scale: the orders do the harm)."""
BESTSELLERS = 6  # items every listing shows: /item/1..6
_NOUNS = ("shirt", "coat", "scarf", "jumper", "trousers", "jacket", "dress", "cap")
_ADJECTIVES = ("sturdy", "light", "warm", "soft", "plain", "bright", "classic", "roomy")

_SEED = "atlas-traps"  # trap content is fixed: it does not follow `atlas web --seed`
_ALLOW_ALL = b"User-agent: *\nAllow: /\n"
_NOT_FOUND = (
    b'<!DOCTYPE html>\n<html lang="en"><head><title>Not found</title></head>'
    b"<body><h1>404 Not Found</h1></body></html>\n"
)

_MONTH = re.compile(r"/calendar/(\d{4})/(\d{2})")
_DAY = re.compile(r"/calendar/(\d{4})/(\d{2})/(\d{2})")
_FOREVER = re.compile(r"/forever/(\d{4,})/(\d{2})")
_PRODUCT = re.compile(r"/product/([1-9]\d*)")
_ITEM = re.compile(r"/item/([1-9]\d*)")
_RANGE = re.compile(r"/range/([2-9]|[1-9]\d+)")
_PAGE_NUMBER = re.compile(r"[1-9]\d*")  # no leading zeros: one spelling per page

# feeds.example.test content, written out so the ground truth reads at a glance.
FEEDS_ARTICLES = 12  # /articles/1..12
FEEDS_LINKED_ARTICLES = 4  # the home page links /articles/1..4; the rest only sitemaps name
_STORIES = ("harbor-lantern", "meadow-orchard", "copper-kettle", "quiet-canal",
            "winter-ferry", "stone-bridge", "amber-beacon", "north-pier")  # fmt: skip
_NOTES = ("solar-grid", "river-survey", "wool-market", "timber-yard")
_PARTNERS = ("coastal-rail", "garden-fair", "museum-night", "orchard-tour", "harbor-week")
_PARTNER_PRIORITIES = (0.9, 0.8, None, 0.6, 0.5)  # None: a line without a priority
_SITEMAP_MEMBERS: dict[str, tuple[str, ...]] = {
    "/sitemap-1.xml": (
        "/",
        "/about",
        *(f"/articles/{n}" for n in range(1, FEEDS_ARTICLES + 1)),
        "/private/report",
    ),
    "/sitemap-2.xml.gz": tuple(f"/stories/{s}" for s in _STORIES),
    "/sitemap-3.xml.gz": ("/about", *(f"/notes/{s}" for s in _NOTES)),
}
_FEEDS_LINKED = ("/", "/about", *(f"/articles/{n}" for n in range(1, FEEDS_LINKED_ARTICLES + 1)))
_PRIORITIES = ("0.3", "0.5", "0.7", "0.8", "1.0")


def url(host: str, path: str, port: int) -> str:
    """``http://HOST:PORT/path`` on the sandbox's port."""
    return f"http://{host}:{port}{path}"


def seed_urls(port: int) -> list[str]:
    """Every trap origin's index page on the sandbox's port."""
    return [url(host, "/", port) for host in TRAP_HOSTS]


def check_scale(scale: int) -> int:
    """``scale`` if it is a usable trap scale, else ValueError."""
    if not 1 <= scale <= MAX_TRAP_SCALE:
        raise ValueError(f"trap scale must be 1..{MAX_TRAP_SCALE}, not {scale}")
    return scale


# ---------------------------------------------------------------------- calendar ground truth


def _month_index(year: int, month: int) -> int:
    return year * 12 + month - 1


def _month_path(prefix: str, index: int) -> str:
    year, month0 = divmod(index, 12)
    return f"/{prefix}/{year:04d}/{month0 + 1:02d}"


def _month_range(scale: int) -> range:
    anchor = _month_index(*CALENDAR_ANCHOR)
    span = CALENDAR_MONTHS_EACH_WAY * check_scale(scale)
    return range(anchor - span, anchor + span + 1)


def calendar_months(scale: int = DEFAULT_TRAP_SCALE) -> list[str]:
    """Paths of every month page served at ``scale``, oldest first (2 x 120 x scale + 1)."""
    return [_month_path("calendar", i) for i in _month_range(scale)]


def calendar_days(scale: int = DEFAULT_TRAP_SCALE) -> list[str]:
    """Paths of every day page served at ``scale``, oldest first."""
    days = []
    for index in _month_range(scale):
        year, month0 = divmod(index, 12)
        for day in range(1, calendar.monthrange(year, month0 + 1)[1] + 1):
            days.append(f"/calendar/{year:04d}/{month0 + 1:02d}/{day:02d}")
    return days


def list_pages(scale: int = DEFAULT_TRAP_SCALE) -> int:
    """The last /list page at ``scale`` (it has no next link; the one after it is 404)."""
    return LIST_PAGES * check_scale(scale)


def repeat_depth(scale: int = DEFAULT_TRAP_SCALE) -> int:
    """The most /a/ segments answered 200 at ``scale``."""
    return REPEAT_DEPTH * check_scale(scale)


# ---------------------------------------------------------------------- facet ground truth


def _grow(base: tuple[str, ...], scale: int) -> tuple[str, ...]:
    """``base``, then ``base`` again suffixed -2, -3, ... until it is ``scale`` times longer."""
    return tuple(v if k == 0 else f"{v}-{k + 1}" for k in range(check_scale(scale)) for v in base)


def facet_values(scale: int = DEFAULT_TRAP_SCALE) -> dict[str, tuple[str, ...]]:
    """Each facet's values at ``scale``, keyed by query key (see FACET_KEYS)."""
    return {
        "color": _grow(FACET_COLORS, scale),
        "size": _grow(FACET_SIZES, scale),
        "sort": FACET_SORTS,
        "page": tuple(str(p) for p in range(1, FACET_PAGES * check_scale(scale) + 1)),
    }


def facet_combinations(scale: int = DEFAULT_TRAP_SCALE) -> int:
    """How many distinct listings /shop serves at ``scale`` (360 at 1, 360,000 at 10)."""
    return math.prod(len(v) for v in facet_values(scale).values())


def listing_path(color: str, size: str, sort: str, page: int | str) -> str:
    """The path and query of one listing, keys always in FACET_KEYS order."""
    return f"/shop?color={color}&size={size}&sort={sort}&page={page}"


def trap_page_count(scale: int = DEFAULT_TRAP_SCALE) -> int:
    """Pages the bounded traps hold at ``scale`` (calendar months and days, /list, /a/, listings);
    /forever/ and /stream have no end and are not counted."""
    return (
        len(calendar_months(scale))
        + len(calendar_days(scale))
        + list_pages(scale)
        + repeat_depth(scale)
        + facet_combinations(scale)
    )


# ---------------------------------------------------------------------- catalogue ground truth


def catalogue_items(scale: int = DEFAULT_TRAP_SCALE) -> int:
    """How many real item pages the catalogue has at ``scale`` (40 x scale)."""
    return CATALOGUE_ITEMS * check_scale(scale)


def catalogue_product_urls(port: int, scale: int = DEFAULT_TRAP_SCALE) -> list[str]:
    """Every real item page of the catalogue at ``scale``."""
    return [url(CATALOGUE, f"/item/{n}", port) for n in range(1, catalogue_items(scale) + 1)]


def catalogue_seed_urls(port: int) -> list[str]:
    """The catalogue's index page."""
    return [url(CATALOGUE, "/", port)]


def is_catalogue_listing(absolute: str) -> bool:
    """Whether ``absolute`` is a catalogue listing (the bare listing or any filter variant)."""
    rest = absolute.split("://", 1)[-1]
    path = "/" + rest.partition("/")[2]
    return path.partition("?")[0] == CATALOGUE_LISTING


def catalogue_listing_urls(scale: int = DEFAULT_TRAP_SCALE) -> int:
    """How many distinct listing URLs the catalogue serves (every subset and order of filter
    keys, every value of each): the bare listing plus sum over k of 5!/(5-k)! x 3^k."""
    n = len(CATALOGUE_FILTERS)
    return 1 + sum(
        math.perm(n, k) * math.prod(len(v) for v in list(CATALOGUE_FILTERS.values())[:k])
        for k in range(1, n + 1)
    )


def catalogue_item_attributes(n: int) -> dict[str, str]:
    """The filter values of item ``n`` beyond the bestsellers (which come in every value)."""
    return {key: values[(n * (i + 2)) % len(values)]
            for i, (key, values) in enumerate(CATALOGUE_FILTERS.items())}  # fmt: skip


def catalogue_listing(filters: Iterable[tuple[str, str]]) -> str:
    """The path and query of the listing with these (key, value) filters, in this order."""
    pairs = list(filters)
    query = "&".join(f"{k}={v}" for k, v in pairs)
    return CATALOGUE_LISTING + (f"?{query}" if query else "")


def catalogue_look(n: int) -> str:
    """The listing item ``n`` links as "the whole look": all five of its filter values, the keys
    in an order of the item's own (the n-th of the 120), as shop pages write facet links in
    whatever order their templates hold. Each item of the first 120 links a listing no other
    page links, so a crawl still meets new listing URLs long after it stopped fetching them."""
    attrs = catalogue_item_attributes(n)
    rest, k, order = list(CATALOGUE_FILTERS), n, []
    while rest:
        k, i = divmod(k, len(rest))
        order.append(rest.pop(i))
    return catalogue_listing([(key, attrs[key]) for key in order])


def catalogue_neighbours(filters: list[tuple[str, str]]) -> list[str]:
    """The listings one filter more or fewer than ``filters`` (as the listing links them):
    each missing filter's every value inserted at a place that varies with the listing and
    the key, and each present filter removed (the others keep their order)."""
    out = []
    here = catalogue_listing(filters)
    have = {k for k, _ in filters}
    for key, values in CATALOGUE_FILTERS.items():
        if key in have:
            out.append(catalogue_listing([(k, v) for k, v in filters if k != key]))
            continue
        digest = hashlib.sha256(f"{_SEED}|{here}|{key}".encode()).digest()
        at = digest[0] % (len(filters) + 1)
        for value in values:
            out.append(catalogue_listing([*filters[:at], (key, value), *filters[at:]]))
    return out


# ---------------------------------------------------------------------- identity ground truth


def product_urls(port: int) -> list[str]:
    """The shop's real product pages (the shop's index links every one plainly)."""
    return [url(SHOP, f"/product/{n}", port) for n in range(1, SHOP_PRODUCTS + 1)]


@dataclass(frozen=True)
class IdentityLink:
    """One link written on a shop page, and the canonical URL it must normalize to."""

    case: str  # what the spelling exercises
    page: str  # absolute URL of the page carrying the link
    base: str  # what the href resolves against: the page, or its <base href>
    href: str  # the attribute exactly as written
    canonical: str  # RFC 3986 resolution + section 6.2.2 normalization, tracking removed


_GCLID = "Cj0KCQiA5sandboxBhDARIsAtlas"
_FBCLID = "IwAR0sandbox3fbclidAtlasTraps"
_BASE_HREFS = {"/base/absolute": "/catalog/", "/base/rooted": "/guide/"}


def _identity_table(port: int) -> list[tuple[str, str, str, str]]:
    """(page path, case, href, canonical path-and-query) for every identity link."""
    p, host = port, SHOP
    return [
        ("/spellings", "upper-case scheme and host", f"HTTP://SHOP.EXAMPLE.TEST:{p}/product/1",
         "/product/1"),
        ("/spellings", "mixed-case host", f"http://Shop.Example.Test:{p}/product/2", "/product/2"),
        ("/spellings", "mixed-case scheme and host, fragment",
         f"hTTp://shop.EXAMPLE.test:{p}/product/3#reviews", "/product/3"),
        ("/spellings", "dot segments", "/product/./x/../4", "/product/4"),
        ("/spellings", "dot segments", "/guide/./../product/5", "/product/5"),
        ("/spellings", "dot segments in an absolute URL",
         f"http://{host}:{p}/product/a/./b/../../6", "/product/6"),
        ("/spellings", "percent-encoded unreserved characters", "/%70roduct/%37", "/product/7"),
        ("/spellings", "dot-relative", "./product/8", "/product/8"),
        ("/spellings", "empty path", f"HTTP://SHOP.EXAMPLE.TEST:{p}", "/"),
        ("/help/sizes/chart", "parent segments", "../../product/9", "/product/9"),
        ("/help/sizes/chart", "parent and dot segments", "../.././guide/../product/10",
         "/product/10"),
        ("/help/sizes/chart", "parent segments above the root", "../../../../product/11",
         "/product/11"),
        ("/promo", "tracking: utm_*",
         "/product/13?utm_source=newsletter&utm_medium=email&utm_campaign=spring", "/product/13"),
        ("/promo", "tracking: gclid", f"/product/14?gclid={_GCLID}", "/product/14"),
        ("/promo", "tracking: fbclid", f"/product/15?fbclid={_FBCLID}", "/product/15"),
        ("/promo", "tracking: all at once, absolute",
         f"http://{host}:{p}/product/16?utm_source=partner&gclid={_GCLID}&fbclid={_FBCLID}",
         "/product/16"),
        ("/promo", "tracking removed, other parameter kept",
         "/product/17?utm_source=promo&color=red&utm_medium=banner", "/product/17?color=red"),
        ("/promo", "tracking and fragment", "/product/18?utm_content=hero#top", "/product/18"),
        ("/base/absolute", "base href (absolute)", "item-1", "/catalog/item-1"),
        ("/base/absolute", "base href (absolute)", "item-2", "/catalog/item-2"),
        ("/base/absolute", "base href (absolute)", "./item-3", "/catalog/item-3"),
        ("/base/rooted", "base href (root-relative)", "returns", "/guide/returns"),
        ("/base/rooted", "base href (root-relative)", "shipping", "/guide/shipping"),
        ("/base/rooted", "base href (root-relative), fragment", "returns#policy", "/guide/returns"),
    ]  # fmt: skip


def identity_links(port: int) -> list[IdentityLink]:
    """Every spelled, relative, tracked or base-relative link on the shop's identity pages."""
    links = []
    for page, case, href, canonical in _identity_table(port):
        base = url(SHOP, _BASE_HREFS.get(page, page), port)
        links.append(
            IdentityLink(case, url(SHOP, page, port), base, href, url(SHOP, canonical, port))
        )
    return links


_BASE_ONLY = ("/catalog/item-1", "/catalog/item-2", "/catalog/item-3", "/guide/returns",
              "/guide/shipping")  # fmt: skip


def base_only_urls(port: int) -> list[str]:
    """Shop pages only a link resolved against a ``<base href>`` reaches."""
    return [url(SHOP, path, port) for path in _BASE_ONLY]


def session_ids(view: int) -> tuple[str, str]:
    """The (sid, jsessionid) written on the shop's ``view``-th product page view (from 1)."""
    digest = hashlib.sha256(f"{_SEED}|session|{view}".encode()).hexdigest()
    return digest[:16], digest[16:48].upper()


# ---------------------------------------------------------------------- discovery ground truth


@dataclass(frozen=True)
class SitemapEntry:
    """One ``<url>`` of a feeds.example.test sitemap."""

    sitemap: str  # path of the sitemap listing it
    loc: str
    lastmod: str | None  # W3C datetime as written, or None when left out
    priority: float | None


def _lastmod(path: str) -> str | None:
    rng = random.Random(f"{_SEED}|lastmod|{path}")
    if rng.random() < 0.2:
        return None
    day = 1 + rng.randrange(28)
    month = 1 + rng.randrange(12)
    if rng.random() < 0.5:
        return f"2024-{month:02d}-{day:02d}"
    return f"2024-{month:02d}-{day:02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00+00:00"


def _priority(path: str) -> str | None:
    rng = random.Random(f"{_SEED}|priority|{path}")
    return None if rng.random() < 0.2 else rng.choice(_PRIORITIES)


def sitemap_entries(port: int) -> list[SitemapEntry]:
    """Every ``<url>`` of every sitemap, in sitemap then document order."""
    entries = []
    for sitemap, paths in _SITEMAP_MEMBERS.items():
        for path in paths:
            priority = _priority(path)
            entries.append(
                SitemapEntry(
                    sitemap,
                    url(FEEDS, path, port),
                    _lastmod(path),
                    None if priority is None else float(priority),
                )
            )
    return entries


def sitemap_urls(port: int) -> list[str]:
    """The sitemaps robots.txt announces (an index and a gzip sitemap)."""
    return [url(FEEDS, path, port) for path in ANNOUNCED_SITEMAPS]


def sitemap_only_urls(port: int) -> list[str]:
    """Pages robots allows that only sitemaps name: no HTML page links to them."""
    seen: dict[str, None] = {}
    for sitemap_paths in _SITEMAP_MEMBERS.values():
        for path in sitemap_paths:
            if path not in _FEEDS_LINKED and not path.startswith(FEEDS_DISALLOWED):
                seen[url(FEEDS, path, port)] = None
    return list(seen)


def sitemap_disallowed_urls(port: int) -> list[str]:
    """Pages a sitemap names that robots.txt disallows (they answer 200 all the same)."""
    return [
        url(FEEDS, path, port)
        for paths in _SITEMAP_MEMBERS.values()
        for path in paths
        if path.startswith(FEEDS_DISALLOWED)
    ]


@dataclass(frozen=True)
class FeedEntry:
    """One line of the partner feed."""

    url: str
    priority: float | None


def partner_feed(port: int) -> list[FeedEntry]:
    """The partner feed's lines: the /partner/ pages, plus two pages found elsewhere too."""
    entries = [
        FeedEntry(url(FEEDS, f"/partner/{slug}", port), priority)
        for slug, priority in zip(_PARTNERS, _PARTNER_PRIORITIES, strict=True)
    ]
    entries.append(FeedEntry(url(FEEDS, "/articles/2", port), 0.4))  # also linked from /
    entries.append(FeedEntry(url(FEEDS, f"/stories/{_STORIES[0]}", port), None))  # and sitemaps
    return entries


def feed_only_urls(port: int) -> list[str]:
    """Pages only the partner feed names (no link, no sitemap)."""
    return [url(FEEDS, f"/partner/{slug}", port) for slug in _PARTNERS]


def write_partner_feed(path: Path, port: int) -> list[FeedEntry]:
    """Write the partner feed to ``path`` (UTF-8, one URL a line, an optional tab and a
    priority); returns what it wrote. Partners hand over files, not URLs to fetch."""
    lines = []
    for entry in partner_feed(port):
        lines.append(entry.url if entry.priority is None else f"{entry.url}\t{entry.priority:.1f}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return partner_feed(port)


# ---------------------------------------------------------------------- serving


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for an absolute path: '.' dropped, '..' pops (never past /)."""
    segments = path.split("/")[1:]
    out: list[str] = []
    for seg in segments:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    # A path ending in '.' or '..' names a directory: /a/b/.. is /a/.
    directory = bool(segments) and segments[-1] in (".", "..") and bool(out)
    return "/" + "/".join(out) + ("/" if directory else "")


def _route(path_qs: str) -> tuple[str, dict[str, str]]:
    """The path a request names and its query, as common servers see them: path parameters
    (;jsessionid=...) dropped, as servlet containers do, percent-decoded, dot segments removed;
    a repeated query key keeps its last value."""
    raw_path, _, query = path_qs.partition("?")
    raw_path = "/".join(seg.partition(";")[0] for seg in raw_path.split("/"))
    path = _remove_dot_segments(unquote(raw_path)) if raw_path.startswith("/") else raw_path
    return path, dict(parse_qsl(query, keep_blank_values=True))


def _page(title: str, links: Iterable[tuple[str, str]], text: str = "", base: str = "") -> bytes:
    """A small HTML page: a title, a sentence and a list of links (written as given)."""
    items = "".join(f'<li><a href="{escape(h)}">{escape(t)}</a></li>\n' for h, t in links)
    base_tag = f'<base href="{escape(base)}">' if base else ""
    para = f"<p>{escape(text)}</p>\n" if text else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{base_tag}'
        f"<title>{escape(title)}</title></head>\n<body><h1>{escape(title)}</h1>\n{para}"
        f"<ul>\n{items}</ul>\n</body></html>\n"
    ).encode()


def _html(body: bytes) -> Answer:
    return 200, {"Content-Type": _HTML}, body


def _not_found() -> Answer:
    return 404, {"Content-Type": _HTML}, _NOT_FOUND


class Traps:
    """Answers for the trap origins at one scale; built once per server."""

    def __init__(self, scale: int = DEFAULT_TRAP_SCALE) -> None:
        self.scale = check_scale(scale)
        self._months = _month_range(scale)
        self._facets = facet_values(scale)
        self._views = itertools.count(1)
        self._views_lock = threading.Lock()
        self._gzipped: dict[tuple[str, int], bytes] = {}

    @staticmethod
    def serves(host: str) -> bool:
        """Whether ``host`` (lowercase, no port) is a trap origin (or the catalogue)."""
        return host in TRAP_HOSTS or host in CATALOGUE_HOSTS

    def answer(self, host: str, path_qs: str, port: int) -> Answer:
        """The answer to a GET or HEAD of ``path_qs`` on trap ``host``."""
        path, query = _route(path_qs)
        if host == CATALOGUE:
            return self._catalogue(path, path_qs.partition("?")[2])
        if host == FEEDS:
            return self._feeds(path, port)
        if path == "/robots.txt":
            return 200, {"Content-Type": _TEXT}, _ALLOW_ALL
        if host == CALENDAR:
            return self._calendar(path, query)
        return self._shop(path, query, port)

    # ------------------------------------------------------------------ calendar

    def _calendar(self, path: str, query: dict[str, str]) -> Answer:
        if path == "/":
            anchor = _month_index(*CALENDAR_ANCHOR)
            cases = [
                (_month_path("calendar", anchor), "Calendar"),
                (_month_path("forever", anchor), "Calendar without end"),
                ("/list?page=1", "Event list"),
                ("/stream?page=1", "Event stream"),
                ("/a/", "Archive"),
            ]
            return _html(_page("Calendar", cases))
        if m := _MONTH.fullmatch(path):
            return self._month(int(m[1]), int(m[2]))
        if m := _DAY.fullmatch(path):
            return self._day(int(m[1]), int(m[2]), int(m[3]))
        # One spelling per month: four digits, more only past 9999 (no 00001).
        if (m := _FOREVER.fullmatch(path)) and m[1] == f"{int(m[1]):04d}":
            return self._forever(int(m[1]), int(m[2]))
        if path in ("/list", "/stream"):
            return self._pagination(path, query.get("page", ""))
        if path.startswith("/a/") and path == "/a" * (path.count("/") - 1) + "/":
            depth = path.count("/") - 1
            if depth > REPEAT_DEPTH * self.scale:
                return _not_found()
            # Relative on purpose: each page's 'a/' resolves one segment deeper.
            return _html(_page(f"Archive, level {depth}", [("a/", "More"), ("/", "Calendar")]))
        return _not_found()

    def _month(self, year: int, month: int) -> Answer:
        if not 1 <= month <= 12 or _month_index(year, month) not in self._months:
            return _not_found()
        index = _month_index(year, month)
        links = [(_month_path("calendar", i), label) for i, label in
                 ((index - 1, "Previous month"), (index + 1, "Next month")) if i in self._months]  # fmt: skip
        days = calendar.monthrange(year, month)[1]
        links += [(f"/calendar/{year:04d}/{month:02d}/{d:02d}", f"{d}") for d in range(1, days + 1)]
        title = f"{calendar.month_name[month]} {year:04d}"
        return _html(_page(title, links, "Events this month, one page a day."))

    def _day(self, year: int, month: int, day: int) -> Answer:
        if not 1 <= month <= 12 or _month_index(year, month) not in self._months:
            return _not_found()
        days = calendar.monthrange(year, month)[1]
        if not 1 <= day <= days:
            return _not_found()
        index = _month_index(year, month)
        links = [(_month_path("calendar", index), "Month")]
        if day > 1:
            links.append((f"/calendar/{year:04d}/{month:02d}/{day - 1:02d}", "Previous day"))
        elif index - 1 in self._months:
            py, pm0 = divmod(index - 1, 12)
            last = calendar.monthrange(py, pm0 + 1)[1]
            links.append((f"/calendar/{py:04d}/{pm0 + 1:02d}/{last:02d}", "Previous day"))
        if day < days:
            links.append((f"/calendar/{year:04d}/{month:02d}/{day + 1:02d}", "Next day"))
        elif index + 1 in self._months:
            ny, nm0 = divmod(index + 1, 12)
            links.append((f"/calendar/{ny:04d}/{nm0 + 1:02d}/01", "Next day"))
        title = f"{day} {calendar.month_name[month]} {year:04d}"
        return _html(_page(title, links, "Nothing is planned for this day."))

    def _forever(self, year: int, month: int) -> Answer:
        if year < 1 or not 1 <= month <= 12:
            return _not_found()
        index = _month_index(year, month)
        links = [(_month_path("forever", index + 1), "Next month")]
        if index - 1 >= _month_index(1, 1):
            links.insert(0, (_month_path("forever", index - 1), "Previous month"))
        title = f"{calendar.month_name[month]} {year:04d}"
        return _html(_page(title, links, "A calendar that never ends."))

    def _pagination(self, path: str, page: str) -> Answer:
        if not _PAGE_NUMBER.fullmatch(page):
            return _not_found()
        n = int(page)
        last = LIST_PAGES * self.scale if path == "/list" else None
        if last is not None and n > last:
            return _not_found()
        links = [(f"{path}?page={n - 1}", "Previous")] if n > 1 else []
        if last is None or n < last:
            links.append((f"{path}?page={n + 1}", "Next"))
        return _html(_page(f"Events, page {n}", links, "Ten more events, and more after them."))

    # ------------------------------------------------------------------ shop

    def _shop(self, path: str, query: dict[str, str], port: int) -> Answer:
        if path == "/":
            links = [(f"/product/{n}", f"Product {n}") for n in range(1, SHOP_PRODUCTS + 1)]
            links += [("/shop", "Browse"), ("/promo", "Offers"), ("/spellings", "Spellings"),
                      ("/help/sizes/chart", "Size chart"), ("/base/absolute", "Catalogue"),
                      ("/base/rooted", "Guides")]  # fmt: skip
            return _html(_page("Shop", links))
        if m := _PRODUCT.fullmatch(path):
            return self._product(int(m[1]))
        if path == "/shop":
            return self._listing(query)
        if path in ("/spellings", "/help/sizes/chart", "/promo", *_BASE_HREFS):
            links = [(href, case) for page, case, href, _ in _identity_table(port) if page == path]
            base = _BASE_HREFS.get(path, "")
            if path == "/base/absolute":
                base = url(SHOP, base, port)
            return _html(_page(f"Shop {path}", links, base=base))
        if path in _BASE_ONLY:
            return _html(_page(f"Shop {path}", [("/", "Shop")], "Found through a base href."))
        return _not_found()

    def _product(self, n: int) -> Answer:
        if n > SHOP_PRODUCTS:
            return _not_found()
        with self._views_lock:
            view = next(self._views)
        sid, jsessionid = session_ids(view)
        related = n % SHOP_PRODUCTS + 1, (n + 1) % SHOP_PRODUCTS + 1
        links = [
            (f"/product/{related[0]}?sid={sid}", f"Product {related[0]}"),
            (f"/product/{related[1]};jsessionid={jsessionid}", f"Product {related[1]}"),
            ("/", "Shop"),
        ]
        return _html(_page(f"Product {n}", links, "A sturdy, useful thing."))

    def _listing(self, query: dict[str, str]) -> Answer:
        facets = self._facets
        if not query:  # the entry: every colour, the other facets at their first value
            entry = [(listing_path(c, facets["size"][0], facets["sort"][0], 1), c)
                     for c in facets["color"]]  # fmt: skip
            return _html(_page("Browse", entry))
        chosen = {key: query.get(key, "") for key in FACET_KEYS}
        if any(value not in facets[key] for key, value in chosen.items()):
            return _not_found()
        links = []
        for key in ("color", "size", "sort"):  # another filter starts again at page 1
            for value in facets[key]:
                if value != chosen[key]:
                    fields = {**chosen, key: value, "page": "1"}
                    links.append((listing_path(*(fields[k] for k in FACET_KEYS)), value))
        page = int(chosen["page"])
        for other, label in ((page - 1, "Previous"), (page + 1, "Next")):
            if str(other) in facets["page"]:
                fields = {**chosen, "page": str(other)}
                links.append((listing_path(*(fields[k] for k in FACET_KEYS)), label))
        key = "&".join(f"{k}={chosen[k]}" for k in FACET_KEYS)
        shown = random.Random(f"{_SEED}|listing|{key}").sample(range(1, SHOP_PRODUCTS + 1),
                                                               LISTING_PRODUCTS)  # fmt: skip
        links += [(f"/product/{n}", f"Product {n}") for n in sorted(shown)]
        return _html(_page(f"Browse {key}", links))

    # ------------------------------------------------------------------ catalogue

    def _catalogue(self, path: str, query: str) -> Answer:
        items = catalogue_items(self.scale)
        if path == "/robots.txt":
            return 200, {"Content-Type": _TEXT}, _ALLOW_ALL
        page = 1 if path == "/" else int(m[1]) if (m := _RANGE.fullmatch(path)) else 0
        if page >= 1 and (page - 1) * CATALOGUE_ITEMS < items:
            first = (page - 1) * CATALOGUE_ITEMS + 1
            links = [(CATALOGUE_LISTING, "Browse the range")]
            links += [(f"/item/{n}", _item_name(n))
                      for n in range(first, min(first + CATALOGUE_ITEMS, items + 1))]  # fmt: skip
            if page * CATALOGUE_ITEMS < items:
                links.append((f"/range/{page + 1}", "More of the range"))
            return _html(_page("Catalogue", links, "Everything we sell, from A to Z."))
        if (m := _ITEM.fullmatch(path)) and int(m[1]) <= items:
            n = int(m[1])
            attrs = catalogue_item_attributes(n)
            links = [(f"/item/{n % items + 1}", _item_name(n % items + 1)),
                     (f"/item/{(n + 1) % items + 1}", _item_name((n + 1) % items + 1)),
                     (catalogue_listing([("colour", attrs["colour"])]), "More in this colour"),
                     (catalogue_listing([("material", attrs["material"])]),
                      "More in this material"),
                     (catalogue_look(n), "The whole look"), ("/", "Catalogue")]  # fmt: skip
            text = (f"{_item_name(n)}: a {attrs['fit']} fit in {attrs['colour']} "
                    f"{attrs['material']}, made for {attrs['season']}, item number {n}.")  # fmt: skip
            return _html(_page(_item_name(n), links, text))
        if path == CATALOGUE_LISTING:
            return self._catalogue_listing(query)
        return _not_found()

    def _catalogue_listing(self, query: str) -> Answer:
        filters: list[tuple[str, str]] = []
        for piece in query.split("&") if query else []:
            key, eq, value = piece.partition("=")
            if not eq or value not in CATALOGUE_FILTERS.get(key, ()) or key in dict(filters):
                return _not_found()
            filters.append((key, value))
        active = dict(filters)
        # The panel lists every value of every filter, a link where it adds or removes a
        # filter, plain text where another value of its filter is chosen: the same text on
        # every listing, so only the URL tells listings apart.
        targets = iter(catalogue_neighbours(filters))
        panel = []
        for key, values in CATALOGUE_FILTERS.items():
            cells = []
            if key in active:
                remove = next(targets)
                for value in values:
                    label = escape(value)
                    cells.append(f'<a href="{escape(remove)}">{label}</a>'
                                 if value == active[key] else f"<span>{label}</span>")  # fmt: skip
            else:
                for value in values:
                    cells.append(f'<a href="{escape(next(targets))}">{escape(value)}</a>')
            panel.append(f"<li>{escape(key)}: {' '.join(cells)}</li>")
        grid = "".join(f'<li><a href="/item/{n}">{escape(_item_name(n))}</a></li>'
                       for n in range(1, BESTSELLERS + 1))  # fmt: skip
        body = (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Catalogue'
            "</title></head>\n<body><h1>Catalogue</h1>\n<p>Our bestsellers, in every colour, "
            f"size, material, fit and season.</p>\n<ul>{''.join(panel)}</ul>\n<ul>{grid}</ul>"
            '\n<p><a href="/">Catalogue</a></p></body></html>\n'
        )
        return _html(body.encode())

    # ------------------------------------------------------------------ feeds

    def _feeds(self, path: str, port: int) -> Answer:
        if path == "/robots.txt":
            lines = ["User-agent: *", f"Disallow: {FEEDS_DISALLOWED}", ""]
            lines += [f"Sitemap: {u}" for u in sitemap_urls(port)]
            return 200, {"Content-Type": _TEXT}, ("\n".join(lines) + "\n").encode()
        if path == SITEMAP_INDEX:
            return 200, {"Content-Type": _XML}, _sitemap_index(port).encode()
        if path in _SITEMAP_MEMBERS:
            if path not in GZIP_SITEMAP_TYPES:
                return 200, {"Content-Type": _XML}, _urlset(path, port).encode()
            body = self._gzipped.get((path, port))
            if body is None:
                # mtime=0: the same bytes in every run. No Content-Encoding: the file itself is
                # gzip, as sitemap-N.xml.gz files on real servers are.
                body = gzip.compress(_urlset(path, port).encode(), mtime=0)
                self._gzipped[(path, port)] = body
            return 200, {"Content-Type": GZIP_SITEMAP_TYPES[path]}, body
        if path == "/":
            links = [(p, p) for p in _FEEDS_LINKED if p != "/"]
            return _html(_page("Feeds", links, "Articles; the rest is in our sitemaps."))
        named = {p for paths in _SITEMAP_MEMBERS.values() for p in paths}
        named |= {f"/partner/{slug}" for slug in _PARTNERS}
        if path in named:
            return _html(_page(f"Feeds {path}", [("/", "Feeds")], "An article."))
        return _not_found()


def _item_name(n: int) -> str:
    """Item ``n``'s name, e.g. 'Item 3: warm scarf'."""
    return f"Item {n}: {_ADJECTIVES[n * 5 % len(_ADJECTIVES)]} {_NOUNS[n % len(_NOUNS)]}"


def _sitemap_index(port: int) -> str:
    items = []
    for path in SITEMAP_PATHS[:2]:
        lastmod = _lastmod(path) or "2024-12-01"
        items.append(f"  <sitemap><loc>{escape(url(FEEDS, path, port))}</loc>"
                     f"<lastmod>{lastmod}</lastmod></sitemap>")  # fmt: skip
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{_SITEMAP_NS}">\n'
        + "\n".join(items)
        + "\n</sitemapindex>\n"
    )


def _urlset(sitemap: str, port: int) -> str:
    items = []
    for entry in sitemap_entries(port):
        if entry.sitemap != sitemap:
            continue
        fields = f"<loc>{escape(entry.loc)}</loc>"
        if entry.lastmod is not None:
            fields += f"<lastmod>{entry.lastmod}</lastmod>"
        if entry.priority is not None:
            fields += f"<priority>{entry.priority:.1f}</priority>"
        items.append(f"  <url>{fields}</url>")
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{_SITEMAP_NS}">\n'
        + "\n".join(items)
        + "\n</urlset>\n"
    )
