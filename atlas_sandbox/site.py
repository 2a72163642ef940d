"""Deterministic content model of the sandbox web: origins, pages, links and robots rules.

Everything here is a pure function of ``(seed, host, path, port)`` plus the page's
*version* (how many generations changed it), so two processes with the same
configuration serve byte-identical pages. Randomness comes from ``random.Random``
seeded with strings (hashed with SHA-512 by CPython), never from ``hash()``, which is
salted per process.
"""

from __future__ import annotations

import hashlib
import random
import sys
import threading
from array import array
from collections import OrderedDict, deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape
from operator import itemgetter
from urllib.parse import urljoin, urlsplit, urlunsplit

FIXED_HOSTS: tuple[str, ...] = (
    "news-a.example.test",
    "docs-b.example.test",
    "store-c.example.test",
)
"""The three hand-designed publishers; generated origins follow them."""

EXTERNAL_HOST = "external.example.org"
"""A host outside the sandbox; a crawler scoped to the sandbox must never fetch it."""

DEFAULT_USER_AGENT_TOKEN = "AtlasBot"

REDIRECT_PATH = "/redirect-me"
"""docs-b path answering 301 to a real docs-b page."""

MIN_PAGES_PER_ORIGIN = 12
"""Home + sections + special pages + a few articles must fit in every origin."""

# Rendered bodies are kept in a bounded LRU: the 50x200 benchmark web is ~600 MB of
# HTML, far too much to keep, while ETags (tiny) are kept for every page ever rendered.
_BODY_CACHE_SIZE = 1024

# Fraction (1/N) of pages whose content changes in each generation bump.
_CHANGE_ONE_IN = 4

_KB = 1024

# Function words first, then content words: the rank gives a Zipf-like frequency so the
# generated text has the statistical shape of prose (extractors score on that).
_FUNCTION_TEXT = """
the of and to a in is that for it with as was on be by this are at from or an which have
not but has its can their more also were been all would will one these they other into
than when there so some such only most may about over after first new between many both
under while where because through during each
"""
_CONTENT_TEXT = """
system data network market policy research report city council budget energy project
team service customer product release version update feature support security
performance storage cluster server request response cache index query table record
schema model training analysis result study evidence effect growth price cost revenue
profit share investor company industry sector supply demand trade export import
government minister election vote campaign region province river mountain forest coast
harbor island valley weather storm rain season summer winter spring autumn school
student teacher university library museum gallery artist music film theater festival
history culture language community family health hospital doctor patient treatment
vaccine disease science climate ocean carbon emission transport railway airport highway
bridge tunnel vehicle engine battery solar wind turbine grid factory worker union
contract wage pension housing rent mortgage loan bank credit interest inflation currency
exchange software hardware device sensor signal protocol package module function method
parameter option setting configuration install upgrade deploy pipeline workflow crawler
scheduler frontier queue thread process memory latency throughput document page article
section chapter paragraph sentence author editor reader journal archive catalog
collection garden kitchen furniture lamp chair shelf blanket kettle bottle basket mirror
carpet window door roof wall floor careful quiet rapid steady gradual sudden modest
strong weak bright dark early late recent ancient modern local national global public
private formal simple complex subtle obvious rare common useful practical reliable
durable fragile remarkable ordinary curious familiar distant nearby central remote urban
rural increase decrease improve reduce expand extend measure compare describe explain
suggest consider observe notice discover develop design build maintain replace announce
confirm deny approve reject propose debate discuss review publish prepare arrange deliver
collect gather divide combine separate protect recover travel arrive depart return visit
remain follow lead manage organize schedule number percent quarter decade century
morning evening afternoon weekend moment question answer problem solution reason purpose
choice chance risk benefit pattern structure surface layer edge corner center boundary
margin distance north south east west upper lower inner outer former latter whole
partial coffee bread cheese apple orange lemon pepper garlic onion butter honey salt
copper silver iron steel timber stone glass paper cotton wool leather clay engineer
scientist farmer merchant sailor pilot driver builder painter writer neighbor visitor
tourist resident citizen official spokesperson committee panel agreement statement
proposal decision standard guideline principle rule lantern meadow orchard village
county district avenue street square beacon compass anchor canal ferry lighthouse pier
dock warehouse
"""
_VOCAB: tuple[str, ...] = tuple(dict.fromkeys(_FUNCTION_TEXT.split() + _CONTENT_TEXT.split()))
_N_FUNCTION = len(dict.fromkeys(_FUNCTION_TEXT.split()))


def _word_table(size: int = 1 << 16) -> tuple[str, ...]:
    """Each word repeated in proportion to a Zipf weight: a uniform 16-bit index is a draw.

    Drawing words through this table with ``randbytes`` is ~20x faster than
    ``Random.choices`` with weights, which matters: the server renders on its own thread
    while the crawler under test shares the GIL.
    """
    weights = [1.0 / (rank + 3) ** 0.85 for rank in range(len(_VOCAB))]
    total = sum(weights)
    counts = [max(1, round(w / total * size)) for w in weights]
    counts[0] += size - sum(counts)  # rounding slack goes to "the"
    return tuple(word for word, n in zip(_VOCAB, counts, strict=True) for _ in range(n))


_WORD_TABLE = _word_table()
# Slugs and titles only use meaningful words.
_SLUG_WORDS: tuple[str, ...] = tuple(w for w in _VOCAB[_N_FUNCTION:] if len(w) >= 4)

_AUTHORS = (
    "Ada Lindqvist",
    "Bruno Okafor",
    "Chen Wei",
    "Dolores Ibarra",
    "Emil Novak",
    "Farah Haddad",
    "Gustav Berg",
    "Hana Kobayashi",
    "Ines Duarte",
    "Jonah Whitfield",
    "Kaia Solberg",
    "Luca Ferri",
)

_SECTIONS: dict[str, tuple[str, ...]] = {
    "news": ("/section/world", "/section/business", "/section/science"),
    "docs": ("/guide/", "/reference/"),
    "store": ("/category/kitchen", "/category/garden", "/category/lighting"),
    "blog": ("/about", "/archive/"),
}

_SITE_NAMES = {
    "news-a.example.test": "Northwind Gazette",
    "docs-b.example.test": "Quarry Docs",
    "store-c.example.test": "Harbor Supply Company",
}

_EXTERNAL_URLS = (
    f"https://{EXTERNAL_HOST}/x",
    f"https://{EXTERNAL_HOST}/about",
    f"http://{EXTERNAL_HOST}/press?ref=sandbox",
)

# (user-agent names, [(directive, path prefix)]) groups per origin kind. Written by
# hand to be realistic; ``disallowed`` evaluates the same data with its own matcher.
_Rules = tuple[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], ...]
_ROBOTS_RULES: dict[str, _Rules] = {
    "news": (
        (("*",), (("Disallow", "/private/"),)),
        # A specific group *replaces* "*" for AtlasBot: /private/ becomes allowed for it.
        (("AtlasBot",), (("Disallow", "/drafts/"),)),
    ),
    "docs": ((("*",), (("Disallow", "/search"),)),),
    "store": (
        (
            ("*",),
            (("Disallow", "/account/"), ("Allow", "/account/help"), ("Disallow", "/cart/")),
        ),
    ),
    "blog": ((("*",), (("Disallow", "/tmp/"),)),),
}


def normalize_url(url: str) -> str:
    """Oracle normalization: lowercase scheme/host, explicit port, no fragment, no utm_*.

    The query keeps its order; only ``utm_*`` parameters are dropped. An empty path
    becomes ``/``.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if scheme == "https" else 80)
    query = "&".join(
        kv for kv in parts.query.split("&") if kv and not kv.lower().startswith("utm_")
    )
    return urlunsplit((scheme, f"{host}:{port}", parts.path or "/", query, ""))


def _relative_href(from_path: str, to_path: str) -> str:
    """Write ``to_path`` relative to the page at ``from_path`` (``x``, ``../y/x``, ``./``)."""
    if to_path == "/":
        return "/"
    to_p, sep, query = to_path.partition("?")
    base_segs = [s for s in from_path[: from_path.rfind("/") + 1].split("/") if s]
    to_dir = to_p[: to_p.rfind("/") + 1]
    to_segs = [s for s in to_dir.split("/") if s]
    leaf = to_p[len(to_dir) :]
    common = 0
    while common < min(len(base_segs), len(to_segs)) and base_segs[common] == to_segs[common]:
        common += 1
    href = "../" * (len(base_segs) - common) + "".join(f"{s}/" for s in to_segs[common:]) + leaf
    return (href or "./") + sep + query


@dataclass(frozen=True, slots=True)
class _Origin:
    host: str
    kind: str  # "news" | "docs" | "store" | "blog"
    name: str
    sections: tuple[str, ...]
    # Pages outside the "next" chain: robots-relevant ones (mostly disallowed).
    specials: tuple[str, ...]
    # Sections then articles; home -> chain[0] -> chain[1] ... makes everything reachable.
    chain: tuple[str, ...]
    popular: tuple[str, ...]
    paths: tuple[str, ...]  # "/" + chain + specials
    path_set: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Link:
    href: str
    text: str
    rel: str | None = None


@dataclass(frozen=True, slots=True)
class _PageLinks:
    """A page's links in document order: header nav, article body, pager, aside, footer."""

    nav: tuple[_Link, ...]
    body: tuple[_Link, ...]
    pager: tuple[_Link, ...]
    aside: tuple[_Link, ...]
    footer: tuple[_Link, ...]

    def all(self) -> tuple[_Link, ...]:
        return self.nav + self.body + self.pager + self.aside + self.footer


class SandboxWeb:
    """A deterministic synthetic web of several origins, addressed as ``http://HOST:PORT``.

    ``port`` is the port absolute links are written with; ``SandboxServer`` sets it to the
    port it really bound before serving (changing it clears the render caches).
    """

    def __init__(
        self,
        seed: int = 7,
        generated_origins: int = 5,
        pages_per_origin: int = 40,
        port: int = 8080,
        page_kb: tuple[int, int] = (20, 100),
    ) -> None:
        if pages_per_origin < MIN_PAGES_PER_ORIGIN:
            raise ValueError(f"pages_per_origin must be >= {MIN_PAGES_PER_ORIGIN}")
        if generated_origins < 0:
            raise ValueError("generated_origins must be >= 0")
        if not 1 <= page_kb[0] <= page_kb[1]:
            raise ValueError("page_kb must be (lo, hi) with 1 <= lo <= hi")
        self.seed = seed
        self.generated_origins = generated_origins
        self.pages_per_origin = pages_per_origin
        self.page_kb = page_kb
        self.generation = 0
        self._port = port
        self._hosts = list(FIXED_HOSTS) + [
            f"site-{i:03d}.example.test" for i in range(1, generated_origins + 1)
        ]
        self._host_set = frozenset(self._hosts)
        # Rendering happens on the server thread while tests query from theirs.
        self._lock = threading.RLock()
        self._origins: dict[str, _Origin] = {}
        self._links: dict[tuple[str, str], _PageLinks] = {}
        self._bodies: OrderedDict[tuple[str, str, int], bytes] = OrderedDict()
        self._etags: dict[tuple[str, str, int], str] = {}
        # Last-Modified dates are anchored to a fixed, seed-derived day (not "now").
        self._epoch = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=seed % 300)

    # ------------------------------------------------------------------ addressing

    @property
    def port(self) -> int:
        """Port written into absolute links and origin URLs."""
        return self._port

    @port.setter
    def port(self, value: int) -> None:
        with self._lock:
            if value != self._port:
                self._port = value
                # Absolute links embed the port, so every rendered byte is stale.
                self._links.clear()
                self._bodies.clear()
                self._etags.clear()

    @property
    def hosts(self) -> list[str]:
        """All origin host names: the fixed publishers, then ``site-NNN.example.test``."""
        return list(self._hosts)

    def is_sandbox_host(self, host: str) -> bool:
        """Whether ``host`` (any case) is one of this web's origins."""
        return host.lower().rstrip(".") in self._host_set

    def origin_url(self, host: str) -> str:
        """``http://HOST:PORT`` for an origin."""
        return f"http://{host}:{self._port}"

    def url(self, host: str, path: str) -> str:
        """Absolute URL of ``path`` on ``host``."""
        return self.origin_url(host) + path

    def seed_urls(self) -> list[str]:
        """Every origin's home page."""
        return [self.origin_url(h) + "/" for h in self._hosts]

    # ------------------------------------------------------------------ structure

    def _rng(self, *parts: object) -> random.Random:
        # str seeds are hashed with SHA-512: stable across processes, unlike hash().
        return random.Random("|".join(str(p) for p in (self.seed, *parts)))

    def _origin(self, host: str) -> _Origin:
        host = host.lower()
        origin = self._origins.get(host)
        if origin is None:
            if host not in self._host_set:
                raise KeyError(f"not a sandbox host: {host}")
            with self._lock:
                origin = self._origins.get(host) or self._build_origin(host)
                self._origins[host] = origin
        return origin

    def _build_origin(self, host: str) -> _Origin:
        rng = self._rng(host, "layout")
        kind = {"news-a": "news", "docs-b": "docs", "store-c": "store"}.get(
            host.split(".")[0], "blog"
        )
        used: set[str] = set()

        def slug() -> str:
            while True:
                s = "-".join(rng.sample(_SLUG_WORDS, rng.randint(2, 4)))
                if s not in used:
                    used.add(s)
                    return s

        specials: list[str]
        if kind == "news":
            specials = [f"/private/{slug()}", f"/drafts/{slug()}", f"/drafts/{slug()}"]
        elif kind == "docs":
            specials = ["/search?q=install", "/search?q=configuration"]
        elif kind == "store":
            specials = ["/account/login", "/account/orders", "/account/help"]
            specials += ["/cart/view", "/cart/checkout"]
        else:
            specials = [f"/tmp/{slug()}", f"/tmp/{slug()}"]
        sections = _SECTIONS[kind]
        articles: list[str] = []
        for _ in range(self.pages_per_origin - 1 - len(sections) - len(specials)):
            if kind == "news":
                articles.append(f"/articles/{slug()}")
            elif kind == "docs":
                articles.append(f"/{rng.choice(('guide', 'guide', 'reference'))}/{slug()}")
            elif kind == "store":
                articles.append(f"/products/{slug()}")
            else:
                articles.append(f"/posts/{slug()}")
        chain = (*sections, *articles)
        name = _SITE_NAMES.get(host) or f"{host.split('.')[0].title()} Journal"
        paths = ("/", *chain, *specials)
        return _Origin(
            host=host,
            kind=kind,
            name=name,
            sections=sections,
            specials=tuple(specials),
            chain=chain,
            popular=tuple(rng.sample(articles, min(4, len(articles)))),
            paths=paths,
            path_set=frozenset(paths),
        )

    def pages(self, host: str) -> list[str]:
        """Every path (with query, if any) that answers 200 on ``host``."""
        return list(self._origin(host).paths)

    def page_urls(self) -> list[str]:
        """Absolute URLs of every page of every origin."""
        return [self.url(h, p) for h in self._hosts for p in self._origin(h).paths]

    def redirect_target(self, host: str, path: str) -> str | None:
        """Path that ``path`` 301-redirects to, or None if it is not a redirect."""
        origin = self._origin(host)
        if origin.kind == "docs" and path == REDIRECT_PATH:
            return self._redirect_source_and_target(origin)[1]
        return None

    @staticmethod
    def _redirect_source_and_target(origin: _Origin) -> tuple[str, str]:
        # The page linking /redirect-me also links the target directly, so the target's
        # depth is the same whether or not a crawler counts a redirect as a hop.
        return origin.chain[2], origin.chain[min(5, len(origin.chain) - 1)]

    def resolve(self, host: str, path_qs: str) -> str | None:
        """Map a requested path+query to a page key: exact, minus utm_*, or bare path."""
        origin = self._origin(host)
        if path_qs in origin.path_set:
            return path_qs
        path, _, query = path_qs.partition("?")
        kept = "&".join(q for q in query.split("&") if q and not q.lower().startswith("utm_"))
        candidate = f"{path}?{kept}" if kept else path
        if candidate in origin.path_set:
            return candidate
        # Like most real servers, unknown query parameters are ignored.
        return path if path in origin.path_set else None

    # ------------------------------------------------------------------ links

    def _href(self, rng: random.Random, host: str, from_path: str, to_path: str) -> str:
        """Write a same-origin link in one of several styles, to exercise normalization."""
        style = rng.choice(("rel", "rel", "root", "root", "abs", "upper", "frag", "utm"))
        if style == "rel":
            return _relative_href(from_path, to_path)
        if style == "root":
            return to_path
        if style == "abs":
            return self.url(host, to_path)
        if style == "upper":
            return self.url(host.upper(), to_path)
        if style == "frag":
            return f"{_relative_href(from_path, to_path)}#section-{rng.randint(1, 3)}"
        sep = "&" if "?" in to_path else "?"
        campaign = rng.randint(1, 99)
        return f"{to_path}{sep}utm_source=newsletter&utm_medium=email&utm_campaign=c{campaign}"

    def _page_links(self, host: str, path: str) -> _PageLinks:
        key = (host, path)
        cached = self._links.get(key)
        if cached is not None:
            return cached
        origin = self._origin(host)
        # Links are independent of the generation: only prose changes between versions.
        rng = self._rng(host, path, "links")
        title = self._title
        # nav[0] is the header logo, rendered outside the menu list.
        nav = [_Link("/", origin.name), _Link("/", "Home")]
        nav += [_Link(s, title(origin, s)) for s in origin.sections]
        nav += [_Link(p, title(origin, p)) for p in origin.popular]
        if origin.kind == "store":
            # Account and cart links in every header: disallowed URLs on every page.
            nav += [
                _Link("/account/login", "Sign in"),
                _Link("/cart/view", "Cart"),
                _Link("/account/help", "Help"),
            ]

        chain_pos = origin.chain.index(path) if path in origin.chain else -1
        targets: list[str] = []
        if path == "/":
            targets.append(origin.chain[0])
        elif 0 <= chain_pos < len(origin.chain) - 1:
            targets.append(origin.chain[chain_pos + 1])
        pager = [
            _Link(self._href(rng, host, path, t), f"Next: {title(origin, t)}", "next")
            for t in targets
        ]

        body_targets: list[str] = []
        candidates = [p for p in origin.paths if p not in (path, "/")]
        for t in rng.sample(candidates, min(rng.randint(2, 7), len(candidates))):
            body_targets.append(t)
        # Every special page is linked from at least one chain page, so the ones robots
        # allows are reachable and the disallowed ones are visibly tempting.
        for j, special in enumerate(origin.specials):
            if chain_pos == (j * 5 + 3) % len(origin.chain) and special not in body_targets:
                body_targets.append(special)
        body = [_Link(self._href(rng, host, path, t), title(origin, t)) for t in body_targets]
        if origin.kind == "docs" and path == self._redirect_source_and_target(origin)[0]:
            target = self._redirect_source_and_target(origin)[1]
            body.append(_Link(REDIRECT_PATH, "Moved page"))
            body.append(_Link(target, title(origin, target)))

        aside: list[_Link] = []
        if path == "/":
            for i, other in enumerate(h for h in FIXED_HOSTS if h != host):
                spelled = other.upper() if i % 2 else other
                aside.append(_Link(self.url(spelled, "/"), _SITE_NAMES[other]))
            # rel=nofollow is a hint for ranking, not a crawl ban; it is a normal link here.
            nf = origin.chain[len(origin.chain) // 2]
            aside.append(_Link(nf, title(origin, nf), "nofollow"))
        if path == "/" or rng.random() < 0.15:
            aside.append(_Link(rng.choice(_EXTERNAL_URLS), "Elsewhere on the web", "external"))

        footer = [_Link("/#top", "Back to top")]
        footer += [_Link(s, title(origin, s)) for s in origin.sections[:1]]
        footer += [
            _Link(f"{s}?utm_source=footer&utm_medium=web", title(origin, s))
            for s in origin.sections[1:2]
        ]
        links = _PageLinks(tuple(nav), tuple(body), tuple(pager), tuple(aside), tuple(footer))
        with self._lock:
            self._links[key] = links
        return links

    def links(self, url: str) -> list[str]:
        """Every ``<a href>`` of the page at ``url``, as written, resolved against the page.

        Fragments, utm_* parameters and upper-case hosts are kept (urljoin only).
        Raises KeyError if ``url`` is not a page of this web.
        """
        host, key = self._locate(url)
        page_url = self.url(host, key)
        return [urljoin(page_url, link.href) for link in self._page_links(host, key).all()]

    def _locate(self, url: str) -> tuple[str, str]:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if host not in self._host_set or (parts.port or 80) != self._port:
            raise KeyError(f"not a page of this sandbox: {url}")
        path_qs = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        key = self.resolve(host, path_qs)
        if key is None:
            raise KeyError(f"not a page of this sandbox: {url}")
        return host, key

    # ------------------------------------------------------------------ robots & sitemap

    def robots_txt(self, host: str) -> str:
        """The origin's robots.txt."""
        origin = self._origin(host)
        lines = [f"# robots.txt for {origin.name}", ""]
        for agents, rules in _ROBOTS_RULES[origin.kind]:
            lines += [f"User-agent: {a}" for a in agents]
            lines += [f"{directive}: {prefix}" for directive, prefix in rules]
            lines.append("")
        lines.append(f"Sitemap: {self.origin_url(origin.host)}/sitemap.xml")
        return "\n".join(lines) + "\n"

    def disallowed(
        self, host: str, path: str, user_agent_token: str = DEFAULT_USER_AGENT_TOKEN
    ) -> bool:
        """Test oracle: does robots.txt forbid ``path`` (with query) to this user agent?

        Group choice: the group whose User-agent name is contained in the token (longest
        wins), else ``*``. Rule choice: longest matching prefix; Allow wins a tie.
        """
        groups = _ROBOTS_RULES[self._origin(host).kind]
        token = user_agent_token.lower()
        best: tuple[tuple[str, str], ...] | None = None
        best_len = -1
        for agents, rules in groups:
            for agent in agents:
                if agent != "*" and agent.lower() in token and len(agent) > best_len:
                    best, best_len = rules, len(agent)
        if best is None:
            best = next((rules for agents, rules in groups if "*" in agents), ())
        verdict, match_len = False, -1
        for directive, prefix in best:
            if path.startswith(prefix):
                allow = directive == "Allow"
                if len(prefix) > match_len or (len(prefix) == match_len and allow):
                    verdict, match_len = not allow, len(prefix)
        return verdict

    def sitemap_xml(self, host: str) -> str:
        """A sitemap of the pages robots allows to every agent, with ``<lastmod>``."""
        origin = self._origin(host)
        entries = []
        for path in origin.paths:
            if self.disallowed(host, path, "*") or self.disallowed(host, path):
                continue
            loc = escape(self.url(origin.host, path))
            lastmod = self.last_modified(origin.host, path).isoformat()
            entries.append(f"  <url><loc>{loc}</loc><lastmod>{lastmod}</lastmod></url>")
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            + "\n".join(entries)
            + "\n</urlset>\n"
        )

    # ------------------------------------------------------------------ oracle BFS

    def reachable(
        self, max_depth: int, user_agent_token: str = DEFAULT_USER_AGENT_TOKEN
    ) -> set[str]:
        """Normalized URLs (see ``normalize_url``) a polite, sandbox-scoped BFS fetches.

        Starts at the seed URLs (depth 0); follows every ``<a href>`` (nofollow too) to
        sandbox hosts on this port, skipping robots-disallowed paths and external hosts.
        A link to a redirect counts as a link to its target. Only 200 pages are returned.
        """
        seen: set[str] = set()
        queue: deque[tuple[str, int]] = deque()
        for url in self.seed_urls():
            norm = normalize_url(url)
            seen.add(norm)
            queue.append((norm, 0))
        while queue:
            url, depth = queue.popleft()
            if depth >= max_depth:
                continue
            for link in self.links(url):
                target = self._follow(link, user_agent_token)
                if target is not None and target not in seen:
                    seen.add(target)
                    queue.append((target, depth + 1))
        return seen

    def sitemap_urls(self) -> set[str]:
        """Normalized URLs of the sitemaps every origin's robots.txt announces."""
        return {normalize_url(f"{self.origin_url(h)}/sitemap.xml") for h in self.hosts}

    def crawlable(
        self, max_depth: int, user_agent_token: str = DEFAULT_USER_AGENT_TOKEN
    ) -> set[str]:
        """``reachable`` plus what a crawler reading sitemaps adds: the pages the announced
        sitemaps list (at depth 1, one below the sitemap) and what links reach from them.
        The sitemaps themselves are in ``sitemap_urls``."""
        seen = self.reachable(max_depth, user_agent_token)
        queue: deque[tuple[str, int]] = deque()
        for host in self.hosts:
            for path in self._origin(host).paths:
                url = normalize_url(self.url(host, path))
                if url in seen or self.disallowed(host, path, "*"):
                    continue
                if self.disallowed(host, path, user_agent_token) or max_depth < 1:
                    continue
                seen.add(url)
                queue.append((url, 1))
        while queue:
            url, depth = queue.popleft()
            if depth >= max_depth:
                continue
            for link in self.links(url):
                target = self._follow(link, user_agent_token)
                if target is not None and target not in seen:
                    seen.add(target)
                    queue.append((target, depth + 1))
        return seen

    def _follow(self, link: str, user_agent_token: str) -> str | None:
        """Normalized URL of the sandbox page ``link`` leads to, if a polite crawler may."""
        norm = normalize_url(link)
        parts = urlsplit(norm)
        host = parts.hostname or ""
        if parts.scheme != "http" or host not in self._host_set or parts.port != self._port:
            return None
        path_qs = parts.path + (f"?{parts.query}" if parts.query else "")
        if self.disallowed(host, path_qs, user_agent_token):
            return None
        target = self.redirect_target(host, path_qs)
        if target is not None:
            path_qs = target
            if self.disallowed(host, path_qs, user_agent_token):
                return None
        if path_qs not in self._origin(host).path_set:
            return None
        return normalize_url(self.url(host, path_qs))

    # ------------------------------------------------------------------ generations

    def bump_generation(self) -> int:
        """Advance the generation: a deterministic ~1/4 of pages get new content."""
        with self._lock:
            self.generation += 1
            return self.generation

    def _changed_in(self, host: str, path: str, generation: int) -> bool:
        digest = hashlib.sha256(f"{self.seed}|{host}|{path}|gen{generation}".encode()).digest()
        return int.from_bytes(digest[:4], "big") % _CHANGE_ONE_IN == 0

    def _version(self, host: str, path: str, generation: int | None = None) -> int:
        """How many generations up to ``generation`` changed this page (0 = original)."""
        gen = self.generation if generation is None else generation
        return sum(self._changed_in(host, path, g) for g in range(1, gen + 1))

    def changed_pages(self, since_generation: int) -> set[str]:
        """Absolute URLs whose bytes differ between ``since_generation`` and now."""
        return {
            self.url(h, p)
            for h in self._hosts
            for p in self._origin(h).paths
            if self._version(h, p, since_generation) != self._version(h, p)
        }

    # ------------------------------------------------------------------ rendering

    def _key(self, host: str, path: str) -> tuple[str, str, int]:
        origin = self._origin(host)
        if path not in origin.path_set:
            raise KeyError(f"no page {path!r} on {host}")
        return origin.host, path, self._version(origin.host, path)

    def render(self, host: str, path: str) -> bytes:
        """The page's HTML bytes at the current generation (memoized, bounded LRU)."""
        key = self._key(host, path)
        with self._lock:
            body = self._bodies.get(key)
            if body is not None:
                self._bodies.move_to_end(key)
                return body
        body = self._render(*key)
        with self._lock:
            self._bodies[key] = body
            self._etags[key] = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            while len(self._bodies) > _BODY_CACHE_SIZE:
                self._bodies.popitem(last=False)
        return body

    def etag(self, host: str, path: str) -> str:
        """Strong, quoted ETag derived from the page's bytes."""
        key = self._key(host, path)
        etag = self._etags.get(key)
        if etag is None:
            self.render(host, path)
            etag = self._etags[key]
        return etag

    def last_modified(self, host: str, path: str) -> datetime:
        """Fixed, seed-derived modification time; one day later per content change."""
        host, path, version = self._key(host, path)
        offset = self._rng(host, path, "meta").randint(0, 30 * 24 * 3600)
        return self._epoch + timedelta(seconds=offset, days=version)

    @staticmethod
    def _title(origin: _Origin, path: str) -> str:
        if path == "/":
            return origin.name
        if path.startswith("/search?q="):
            return f"Search results for {path.partition('=')[2]}"
        leaf = path.partition("?")[0].rstrip("/").rsplit("/", 1)[-1]
        return leaf.replace("-", " ").title()

    def _render(self, host: str, path: str, version: int) -> bytes:
        origin = self._origin(host)
        links = self._page_links(host, path)
        meta = self._rng(host, path, "meta")
        lo, hi = self.page_kb[0] * _KB, self.page_kb[1] * _KB
        # Stop a paragraph short of the ceiling: the last paragraph may overshoot a bit.
        target = meta.randint(lo, max(lo, hi - 2 * _KB))
        author = meta.choice(_AUTHORS)
        published = self._epoch - timedelta(days=meta.randint(1, 400))
        # Each page has its own topic words, so pages differ in vocabulary and not only in
        # word order: they take over a few slices of the word table.
        table = list(_WORD_TABLE)
        span = len(table) // 300
        for word in meta.sample(_SLUG_WORDS, 15):
            start = meta.randrange(len(table) - span)
            table[start : start + span] = [word] * span
        prose = self._rng(host, path, "prose", version)
        title = self._title(origin, path)
        modified = self.last_modified(host, path)

        def para() -> str:
            shape = prose.randbytes(8)
            lengths = [7 + b % 16 for b in shape[: 3 + shape[7] % 5]]
            picks = array("H", prose.randbytes(2 * sum(lengths)))
            if sys.byteorder == "big":
                picks.byteswap()  # the same words on every platform
            words = list(itemgetter(*picks)(table))
            sentences = []
            pos = 0
            for n in lengths:
                sentence = words[pos : pos + n]
                pos += n
                if n > 10:
                    sentence[n // 2] += ","
                sentence[0] = sentence[0].capitalize()
                sentences.append(" ".join(sentence) + ".")
            return " ".join(sentences)

        def anchor(link: _Link, cls: str | None = None) -> str:
            attrs = f' href="{escape(link.href)}"'
            if link.rel in ("nofollow", "next"):
                attrs += f' rel="{link.rel}"'
            if cls:
                attrs += f' class="{cls}"'
            return f"<a{attrs}>{escape(link.text)}</a>"

        description = para().split(". ")[0][:150]
        head = [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title if path == '/' else f'{title} | {origin.name}')}</title>",
            f'<meta name="author" content="{escape(author)}">',
            f'<meta name="description" content="{escape(description)}.">',
            f'<meta property="og:site_name" content="{escape(origin.name)}">',
            f'<meta property="og:title" content="{escape(title)}">',
            '<meta property="og:type" content="article">',
            f'<meta property="article:published_time" content="{published.isoformat()}">',
        ]
        if version:
            head.append(f'<meta property="article:modified_time" content="{modified.isoformat()}">')
        head += [
            "</head>",
            '<body id="top">',
            '<header class="site-header">',
            anchor(links.nav[0], "logo"),
            '<nav class="main-nav" aria-label="Main">',
            "<ul>",
            *(f"<li>{anchor(link)}</li>" for link in links.nav[1:]),
            "</ul>",
            "</nav>",
            "</header>",
            "<main>",
            "<article>",
            f"<h1>{escape(title)}</h1>",
            f'<p class="byline">By <span class="author">{escape(author)}</span> &middot; '
            f'<time datetime="{published.isoformat()}">{published:%B %d, %Y}</time></p>',
        ]
        tail = ["</article>"]
        if links.pager:
            tail += ['<nav class="pager">', *(anchor(x) for x in links.pager), "</nav>"]
        if links.aside:
            tail += ['<aside class="elsewhere">', "<h2>Elsewhere</h2>", "<ul>"]
            tail += [f"<li>{anchor(x)}</li>" for x in links.aside]
            tail += ["</ul>", "</aside>"]
        tail += [
            "</main>",
            '<footer class="site-footer">',
            "<ul>",
            *(f"<li>{anchor(x)}</li>" for x in links.footer),
            "</ul>",
            f"<p>&copy; {self._epoch.year} {escape(origin.name)}. All rights reserved.</p>",
            "</footer>",
            "</body>",
            "</html>",
            "",
        ]
        size = sum(len(s) + 1 for s in head) + sum(len(s) + 1 for s in tail)
        body: list[str] = []
        pending = list(links.body)
        n = 0
        while size < target or pending:
            n += 1
            if n % 6 == 0:
                heading = " ".join(prose.choices(_SLUG_WORDS, k=prose.randint(2, 5))).capitalize()
                line = f'<h2 id="section-{n // 6}">{heading}</h2>'
                body.append(line)
                size += len(line) + 1
            text = para()
            # One inline link per paragraph from the second on, like real articles.
            if n >= 2 and pending and (size >= target or prose.random() < 0.7):
                text += f" See also {anchor(pending.pop(0))}."
            line = f"<p>{text}</p>"
            body.append(line)
            size += len(line) + 1
        return "\n".join(head + body + tail).encode("ascii")
