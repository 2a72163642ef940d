"""Changing content: pages that change at known rates, and validators that lie, on loopback
(`atlas web --changing`).

A recrawl policy is only as good as what it learns from revisits: how often a page really
changes, and whether a conditional request can be trusted to say so. These origins give both a
ground truth.

rates.example.test  (the Tidewater Ledger: change rates under control)
  /                     an index page linking every page below; it never changes
  /robots.txt           allows everything
  /volatile/1..6        new content in every generation (version = generation)
  /weekly/1..6          new content every 4th generation (version = generation // 4)
  /static/1..6          never changes (version 0)
                        Every page is an article: a title and five paragraphs of 400+ characters
                        opening with "Edition N." (N = version + 1); the words and paragraph
                        order follow (path, version), so each version extracts to another text.
                        Strong ETag (a hash of the body), Last-Modified = 2024-01-01 UTC plus
                        version days; If-None-Match (else If-Modified-Since) answers 304
etag-churn.example.test  (the Churnside Notes: misleading validators)
  /, /robots.txt, /page/1..6
                        content never changes, but every HTML response carries a new ETag (it
                        holds a per-server response counter), so If-None-Match never matches and
                        never gets a 304; no Last-Modified
no-conditional.example.test  (the Plainview Bulletin: validators ignored)
  /, /robots.txt, /page/1..6
                        content never changes; a stable strong ETag and a Last-Modified, but
                        always 200 with the full body whatever If-None-Match or
                        If-Modified-Since say

Everything else answers 404; a query string is ignored. The generation starts at 0 and only
``bump_generation()`` moves it (`atlas web` does so on SIGUSR1, together with the main site's).
Bodies are a pure function of (host, path, version, port): the port appears only in the
canonical link, which extraction leaves out.

Ground truth for tests: ``pages``, ``version``, ``changed_between`` and
``expected_change_rate``.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import random
import threading
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from html import escape
from urllib.parse import urlsplit

RATES = "rates.example.test"
ETAG_CHURN = "etag-churn.example.test"
NO_CONDITIONAL = "no-conditional.example.test"
CHANGING_HOSTS: tuple[str, ...] = (RATES, ETAG_CHURN, NO_CONDITIONAL)
"""Changing-content origin hosts: map these to loopback in a crawl's `resolve`."""

PAGES_PER_KIND = 6
WEEKLY_PERIOD = 4  # generations per weekly change
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
"""Last-Modified of version 0; each version adds a day."""

Answer = tuple[int, dict[str, str], bytes]

_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
# Revalidate on every use: these pages exist to be revalidated.
_CACHE_CONTROL = "no-cache"
_ALLOW_ALL = b"User-agent: *\nAllow: /\n"
_NOT_FOUND = (
    b'<!DOCTYPE html>\n<html lang="en"><head><title>Not found</title></head>'
    b"<body><h1>404 Not Found</h1></body></html>\n"
)
_PARAGRAPHS = 5
_MIN_PARAGRAPH = 420  # characters: comfortably over the 400 an extractor wants to see

_SITE_NAMES = {
    RATES: "The Tidewater Ledger",
    ETAG_CHURN: "The Churnside Notes",
    NO_CONDITIONAL: "The Plainview Bulletin",
}
_TOPICS: dict[tuple[str, str], tuple[str, ...]] = {
    (RATES, "volatile"): (
        "River levels at Millbrook weir", "Harbour tide readings", "Fish market prices",
        "Ferry delays and cancellations", "Road works on the coast road",
        "Air quality in the town centre",
    ),
    (RATES, "weekly"): (
        "Allotment notes", "Library events this week", "Parish council digest",
        "Farmers' market report", "Coastal path conditions", "Youth football round-up",
    ),
    (RATES, "static"): (
        "History of the lighthouse", "About the harbour museum", "How the tide mill works",
        "The old customs house", "A guide to the salt marshes", "Founding of the rowing club",
    ),
    (ETAG_CHURN, "page"): (
        "Visiting the abbey ruins", "Walking the cliff railway", "The cider orchards",
        "Birdwatching on the estuary", "The weavers' cottages", "Churnside in winter",
    ),
    (NO_CONDITIONAL, "page"): (
        "The plain and its windmills", "Bus routes across the county", "The grain exchange",
        "Schools of the district", "Plainview's water tower", "The annual horse fair",
    ),
}  # fmt: skip
_KINDS: dict[str, tuple[str, ...]] = {
    RATES: ("volatile", "weekly", "static"),
    ETAG_CHURN: ("page",),
    NO_CONDITIONAL: ("page",),
}
_ALL_KINDS = frozenset(k for kinds in _KINDS.values() for k in kinds)
_NUMBERS = frozenset(str(n) for n in range(1, PAGES_PER_KIND + 1))  # "01" is not a page

# Sentence parts: enough combinations that two versions of a page share few sentences.
_SUBJECTS = (
    "The harbour board", "The river authority", "Local traders", "The county library",
    "Volunteers at the lighthouse", "The ferry operator", "Residents of the old quarter",
    "The weather station on the pier", "Farmers in the valley", "The museum's curators",
    "The regional rail company", "Teachers at the village school", "The fishing cooperative",
    "A panel of engineers",
)  # fmt: skip
_VERBS = (
    "reported", "confirmed", "announced", "recorded", "described", "noted", "published",
    "estimated", "questioned", "welcomed",
)  # fmt: skip
_OBJECTS = (
    "a steady rise in visitor numbers", "fresh figures on water levels",
    "a revised timetable for the summer", "new prices for the coming week",
    "a shortage of timber at the sawmill", "plans to repair the sea wall",
    "an unusual run of calm mornings", "longer opening hours at the market",
    "a survey of the footpaths", "the cost of dredging the channel",
    "a proposal to widen the bridge", "complaints about parking near the quay",
    "a grant for the community hall", "the results of the spring count",
)  # fmt: skip
_PLACES = (
    "along the northern coast", "in the harbour district", "near the old canal",
    "across the county", "at the eastern pier", "in the upland villages", "by the estuary",
    "on the market square",
)  # fmt: skip
_TIMES = (
    "on Monday morning", "late on Thursday", "over the weekend", "earlier this month",
    "after a short delay", "during the night", "at the start of the week", "before dawn",
)  # fmt: skip
_CLAUSES = (
    "according to figures shared with this paper", "although officials urged caution",
    "which surprised many observers", "as the season turned",
    "while the wider picture remains unclear", "ahead of a public meeting next week",
    "despite a wet and windy fortnight", "after months of quiet negotiation",
)  # fmt: skip
_LATER = (
    "by the end of the month", "next week", "once the survey is finished",
    "after the holiday", "when the council next meets",
)  # fmt: skip
_NAMES = (
    "Maren Holt", "Tobias Quayle", "Ruth Penhallow", "Idris Vance", "Selma Ashby",
    "Owen Tregarth", "Lena Marsh", "Caleb Dunmore",
)  # fmt: skip
_ROLES = (
    "who chairs the residents' association", "a spokesperson for the council",
    "the harbour master", "a retired pilot", "who runs the bakery on Quay Street",
    "a researcher at the marine station",
)  # fmt: skip
_QUOTES = (
    "We have seen nothing quite like it in twenty years",
    "People deserve to know what is happening and when",
    "It is too early to say whether the change will last",
    "The numbers speak for themselves, but they need careful reading",
    "Most of the work is done early, before anyone notices",
    "We will look at it again when the weather settles",
)  # fmt: skip


# ---------------------------------------------------------------------- ground truth


def pages(host: str) -> list[str]:
    """Paths of ``host``'s article pages (not the index or robots.txt), in index order.

    KeyError for a host that is not a changing-content origin."""
    return [f"/{kind}/{n}" for kind in _KINDS[host] for n in range(1, PAGES_PER_KIND + 1)]


_PAGE_SETS = {host: frozenset(pages(host)) for host in CHANGING_HOSTS}


def _kind(path: str) -> str:
    """The kind of an article path ("volatile", "weekly", "static", "page"); KeyError else."""
    parts = path.split("/")
    if len(parts) == 3 and parts[0] == "" and parts[1] in _ALL_KINDS and parts[2] in _NUMBERS:
        return parts[1]
    raise KeyError(path)


def _path_of(target: str) -> str:
    parts = urlsplit(target)
    return parts.path if parts.scheme else target.partition("?")[0]


def version(path: str, generation: int) -> int:
    """The content version of ``path`` at ``generation`` (0 = original). The index and every
    page of etag-churn and no-conditional stay at 0."""
    if generation < 0:
        raise ValueError(f"generation must be >= 0, not {generation}")
    if path == "/":
        return 0
    kind = _kind(path)
    if kind == "volatile":
        return generation
    if kind == "weekly":
        return generation // WEEKLY_PERIOD
    return 0


def expected_change_rate(target: str) -> float:
    """Content changes per generation of a page (path or absolute URL): 1.0 for /volatile/,
    0.25 for /weekly/, 0.0 for everything else. KeyError for a path no origin serves."""
    path = _path_of(target)
    if path == "/":
        return 0.0
    kind = _kind(path)
    return {"volatile": 1.0, "weekly": 1.0 / WEEKLY_PERIOD}.get(kind, 0.0)


def url(host: str, path: str, port: int) -> str:
    """``http://HOST:PORT/path``."""
    return f"http://{host}:{port}{path}"


def changed_between(g0: int, g1: int, port: int) -> set[str]:
    """Absolute URLs whose content differs between generations ``g0`` and ``g1``."""
    return {
        url(host, path, port)
        for host in CHANGING_HOSTS
        for path in pages(host)
        if version(path, g0) != version(path, g1)
    }


def last_modified(path: str, generation: int) -> datetime:
    """The Last-Modified a rates or no-conditional page sends at ``generation``."""
    return EPOCH + timedelta(days=version(path, generation))


# ---------------------------------------------------------------------- rendering


def _topic(host: str, path: str) -> str:
    kind, number = path.strip("/").split("/")
    return _TOPICS[(host, kind)][int(number) - 1]


def _sentence(rng: random.Random, topic: str) -> str:
    subject, verb, obj = rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS)
    place, time, clause = rng.choice(_PLACES), rng.choice(_TIMES), rng.choice(_CLAUSES)
    low, high = rng.randint(3, 40), rng.randint(41, 90)
    shape = rng.randrange(6)
    if shape == 0:
        return f"{subject} {verb} {obj} {place} {time}, {clause}."
    if shape == 1:
        return f"{time.capitalize()}, {subject[0].lower() + subject[1:]} {verb} {obj}."
    if shape == 2:
        return (
            f"The figure stood at {high} percent {place}, against {low} percent a year ago, "
            f"{clause}."
        )
    if shape == 3:
        name, role, quote = rng.choice(_NAMES), rng.choice(_ROLES), rng.choice(_QUOTES)
        return f'"{quote}," said {name}, {role}.'
    if shape == 4:
        lowered = subject[0].lower() + subject[1:]
        return f'Readers of "{topic}" will find that {lowered} {verb} {obj} {place}.'
    return f"{subject} expect to say more {rng.choice(_LATER)}, {clause}."


def _paragraphs(host: str, path: str, ver: int) -> list[str]:
    rng = random.Random(f"{host}|{path}|v{ver}")
    topic = _topic(host, path)
    out = []
    for _ in range(_PARAGRAPHS):
        sentences: list[str] = []
        while sum(len(s) + 1 for s in sentences) < _MIN_PARAGRAPH:
            sentences.append(_sentence(rng, topic))
        out.append(" ".join(sentences))
    rng.shuffle(out)
    modified = EPOCH + timedelta(days=ver)
    # The edition line leads, so even two versions whose sentences collide differ in text.
    out[0] = f"Edition {ver + 1}. This page was last revised on {modified:%d %B %Y}. " + out[0]
    return out


@functools.lru_cache(maxsize=512)
def _render_page(host: str, path: str, ver: int, port: int) -> bytes:
    site, topic = _SITE_NAMES[host], _topic(host, path)
    modified = EPOCH + timedelta(days=ver)
    rng = random.Random(f"{host}|{path}|author")
    author = rng.choice(_NAMES)
    lines = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{escape(topic)} | {escape(site)}</title>",
        f'<meta name="author" content="{escape(author)}">',
        f'<meta property="article:modified_time" content="{modified.date().isoformat()}">',
        f'<link rel="canonical" href="{escape(url(host, path, port))}">',
        "</head>",
        "<body>",
        '<header class="masthead">',
        f'<a class="logo" href="/">{escape(site)}</a>',
        '<nav aria-label="Main"><ul><li><a href="/">All pages</a></li></ul></nav>',
        "</header>",
        "<main>",
        "<article>",
        f"<h1>{escape(topic)}</h1>",
        f'<p class="byline">By {escape(author)}, {modified:%d %B %Y}</p>',
        *(f"<p>{escape(p)}</p>" for p in _paragraphs(host, path, ver)),
        "</article>",
        "</main>",
        '<footer class="site-footer">',
        f"<p>&copy; 2024 {escape(site)}. All rights reserved.</p>",
        "</footer>",
        "</body>",
        "</html>",
        "",
    ]
    return "\n".join(lines).encode()


@functools.lru_cache(maxsize=len(CHANGING_HOSTS))
def _render_index(host: str) -> bytes:
    site = _SITE_NAMES[host]
    items = [f'<li><a href="{p}">{escape(_topic(host, p))}</a></li>' for p in pages(host)]
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(site)}'
        f"</title></head>\n<body><h1>{escape(site)}</h1>\n<p>Every page we publish.</p>\n"
        "<ul>\n" + "\n".join(items) + "\n</ul>\n</body></html>\n"
    ).encode()


def _hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:32]


class Changing:
    """Answers for the changing-content origins and their generation counter; built once per
    server. ``port`` is the server's port, used by ``changed_between`` (servers set it)."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.generation = 0
        self._lock = threading.Lock()
        self._responses = itertools.count(1)  # etag-churn's ETag suffix

    @staticmethod
    def serves(host: str) -> bool:
        """Whether ``host`` (lowercase, no port) is a changing-content origin."""
        return host in CHANGING_HOSTS

    @staticmethod
    def pages(host: str) -> list[str]:
        """Paths of ``host``'s article pages (see the module's ``pages``)."""
        return pages(host)

    @staticmethod
    def expected_change_rate(target: str) -> float:
        """Changes per generation of a page (see the module's ``expected_change_rate``)."""
        return expected_change_rate(target)

    def bump_generation(self) -> int:
        """Advance the generation (volatile pages change, weekly ones every 4th); returns it."""
        with self._lock:
            self.generation += 1
            return self.generation

    def changed_between(self, g0: int, g1: int) -> set[str]:
        """Absolute URLs (on ``port``) whose content differs between generations g0 and g1."""
        return changed_between(g0, g1, self.port)

    def answer(self, host: str, path_qs: str, port: int, headers: Mapping[str, str]) -> Answer:
        """The answer to a GET or HEAD of ``path_qs`` on ``host`` with request ``headers``
        (If-None-Match and If-Modified-Since are read)."""
        path = path_qs.partition("?")[0]
        if path == "/robots.txt":
            return 200, {"Content-Type": _TEXT}, _ALLOW_ALL
        with self._lock:
            generation = self.generation
        if path == "/":
            body = _render_index(host)
        elif path in _PAGE_SETS[host]:
            body = _render_page(host, path, version(path, generation), port)
        else:
            return 404, {"Content-Type": _HTML}, _NOT_FOUND
        if host == ETAG_CHURN:
            with self._lock:
                n = next(self._responses)
            # Same bytes, new tag: a validator that never validates anything.
            etag = f'"{_hash(body)[:24]}-{n}"'
            return 200, {"ETag": etag, "Cache-Control": _CACHE_CONTROL, "Content-Type": _HTML}, body
        modified = last_modified(path, generation)
        validators = {
            "ETag": f'"{_hash(body)}"',
            "Last-Modified": format_datetime(modified, usegmt=True),
            "Cache-Control": _CACHE_CONTROL,
        }
        if host == RATES:
            # web.py imports this module, so importing it back at load time would be circular.
            from .web import _not_modified

            if _not_modified(headers, validators["ETag"], modified):
                return 304, validators, b""
        return 200, {**validators, "Content-Type": _HTML}, body
