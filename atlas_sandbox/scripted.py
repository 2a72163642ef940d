"""Script-drawn pages for the render lane, on loopback (`atlas web --scripted`).

A crawler that only reads raw HTML sees empty shells here; a browser that runs the scripts sees
articles. Every request the browser makes (documents, scripts, XHR, images, fonts) reaches this
server and lands in its request log like any other, so politeness is checked server-side.

scripted.example.test  (the Lanternfield Gazette, shells of ~2 KB)
  /                       an index linking every shell below and plain-render's index
  /robots.txt             allows everything
  /inline/1, /inline/2    the article is base64 JSON inside an inline <script>, drawn at parse
  /xhr/1 (fetch), /xhr/2 (XMLHttpRequest)
                          the article comes from /api/article/<n>.json, drawn when it answers
  /slow/1                 the article comes from /api/slow/1.json, answered after SLOW_DELAY_S
  /never-loads/1          inline article, plus an async script (/drip/forever.js) that drips a
                          byte every DRIP_INTERVAL_S and never ends: `load` never fires, while
                          DOMContentLoaded and the drawn text do
  /canary/1               inline article, then an XHR to the SSRF canary (127.0.0.1:CANARY) and
                          a fetch of the cloud metadata address; both may fail, the text stands
  Every shell also has an <img> (/img/<name>.png), an @font-face font (/fonts/gazette.woff2),
  a stylesheet (/static/gazette.css), an async script from cdn-scripts (FORBIDDEN_SCRIPT_URL
  path) and a link to the next shell, so a crawler discovers the ring from /.
cdn-scripts.example.test
  /robots.txt             disallows /forbidden/ to every agent
  /forbidden/widget.js    appends FORBIDDEN_MARK to the page: a renderer honouring robots never
                          runs it
plain-render.example.test  (the Ashgrove Almanac: text already in the raw HTML)
  /, /robots.txt (allows everything), /articles/1..3 (each with an inline script that draws
                          nothing, and more words than render.skip_above_words by default)

No sitemaps (as the directive origin). Everything else answers 404; a query is ignored. Drawn
text is the shell's <main id="story">, marked data-drawn="1" once drawn.
Ground truth for tests: ``kinds``, ``truth``, ``resources``.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import random
from collections.abc import AsyncGenerator
from html import escape

from .hostile import DEFAULT_CANARY_PORT, METADATA_URLS, Answer, Stream

SCRIPTED = "scripted.example.test"
CDN = "cdn-scripts.example.test"
PLAIN = "plain-render.example.test"
SCRIPTED_HOSTS: tuple[str, ...] = (SCRIPTED, CDN, PLAIN)
"""Scripted origin hosts: map these to loopback in a crawl's `resolve`."""

SLOW_DELAY_S = 5.0
DRIP_INTERVAL_S = 0.5
FORBIDDEN_SCRIPT_PATH = "/forbidden/widget.js"
FORBIDDEN_MARK = "FORBIDDEN-SCRIPT-RAN"
CANARY_PATH = "/from-scripted"
METADATA_URL = METADATA_URLS[0]  # http://169.254.169.254/latest/meta-data/

# shell path -> kind; the order is the ring the shells link around
PAGES: dict[str, str] = {
    "/inline/1": "inline",
    "/inline/2": "inline",
    "/xhr/1": "xhr",
    "/xhr/2": "xhr",
    "/slow/1": "slow",
    "/never-loads/1": "never-loads",
    "/canary/1": "canary",
}
PLAIN_PAGES: tuple[str, ...] = ("/articles/1", "/articles/2", "/articles/3")
_API = {f"/api/article/{p.rsplit('/', 1)[1]}.json": p for p, k in PAGES.items() if k == "xhr"}

_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_JSON = "application/json"
_JS = "text/javascript; charset=utf-8"
_NOT_FOUND = (
    b'<!DOCTYPE html>\n<html lang="en"><head><title>Not found</title></head>'
    b"<body><h1>404 Not Found</h1></body></html>\n"
)
_ALLOW_ALL = b"User-agent: *\nAllow: /\n"
_CDN_ROBOTS = b"User-agent: *\nDisallow: /forbidden/\n"
# a 1x1 transparent PNG: a real image, so a renderer that loads it gets no decode error
_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
# not a valid font: the browser falls back to the next family, the text still shows
_FONT = b"wOF2" + bytes(60)
_CSS = b"main{max-width:40em;margin:auto}img{width:1px;height:1px}\n"
_FORBIDDEN_JS = (
    "(function(){var p=document.createElement('p');p.id='forbidden';"
    f"p.textContent='{FORBIDDEN_MARK}';document.body.appendChild(p);}})();\n"
).encode()
_DRIP_HEAD = b"/* this script never finishes loading */\n"

# Article words: long ones that no shell's markup or script spells (tests check raw HTML for
# them), plus a few short function words so the prose has the shape extractors score.
_WORD_TEXT = (
    "orchard harvest meadow lantern ferryman harbour granary millpond shepherd bellringer "
    "cobblestone weathervane marshland heathland blacksmith apprentice chronicle almanac "
    "riverbank floodgate turnstile lighthouse seafarer boatyard vineyard beekeeper hedgerow "
    "watermill tannery cooperage saddlery threshing plough coppice bramble hawthorn willow "
    "kingfisher heron curlew lapwing skylark drizzle thunderstorm snowdrift equinox solstice "
    "parishioner alderman magistrate ledger tollhouse causeway embankment quarry limestone "
    "sandstone chimney thatcher glassblower potter weaver spindle loom"
)
_WORDS = tuple(_WORD_TEXT.split())
_SMALL = ("the", "of", "and", "in", "a", "by", "near", "after")


# ---------------------------------------------------------------------- ground truth


def url(host: str, path: str, port: int) -> str:
    """``http://HOST:PORT/path`` on the sandbox's port."""
    return f"http://{host}:{port}{path}"


def seed_urls(port: int) -> list[str]:
    """The index pages a crawl starts from (cdn-scripts has none)."""
    return [url(SCRIPTED, "/", port), url(PLAIN, "/", port)]


def kinds(port: int) -> dict[str, str]:
    """URL -> kind for every article page: inline, xhr, slow, never-loads, canary, plain."""
    out = {url(SCRIPTED, path, port): kind for path, kind in PAGES.items()}
    return out | {url(PLAIN, path, port): "plain" for path in PLAIN_PAGES}


def truth(port: int) -> dict[str, str]:
    """URL -> the article text each page shows once its scripts ran (for plain pages, the text
    in its raw HTML): the heading, then one line per paragraph."""
    pages = [(SCRIPTED, p) for p in PAGES] + [(PLAIN, p) for p in PLAIN_PAGES]
    return {url(host, path, port): "\n".join(_lines(host, path)) for host, path in pages}


def _lines(host: str, path: str) -> tuple[str, ...]:
    title, paragraphs = _article(host, path)
    return (title, *paragraphs)


def resources(
    path: str, port: int, canary_port: int = DEFAULT_CANARY_PORT
) -> list[tuple[str, str]]:
    """(resource type as Playwright names it, URL) of what the shell at ``path`` requests
    besides itself (the font is asked for only once text in it is drawn)."""
    n = path.rsplit("/", 1)[1]
    out = [
        ("stylesheet", url(SCRIPTED, "/static/gazette.css", port)),
        ("image", url(SCRIPTED, f"/img/{_slug(path)}.png", port)),
    ]
    kind = PAGES[path]
    if kind == "xhr":
        out.append(("fetch" if n == "1" else "xhr", url(SCRIPTED, f"/api/article/{n}.json", port)))
    elif kind == "slow":
        out.append(("fetch", url(SCRIPTED, f"/api/slow/{n}.json", port)))
    elif kind == "never-loads":
        out.append(("script", url(SCRIPTED, "/drip/forever.js", port)))
    elif kind == "canary":
        out.append(("xhr", f"http://127.0.0.1:{canary_port}{CANARY_PATH}"))
        out.append(("fetch", METADATA_URL))
    out.append(("script", url(CDN, FORBIDDEN_SCRIPT_PATH, port)))
    out.append(("font", url(SCRIPTED, "/fonts/gazette.woff2", port)))
    return out


@functools.lru_cache(maxsize=32)
def _article(host: str, path: str) -> tuple[str, tuple[str, ...]]:
    rng = random.Random(f"atlas-scripted|{host}|{path}")
    title = " ".join(w.capitalize() for w in rng.sample(_WORDS, 4))
    paragraphs = []
    # the almanac's articles are a paragraph longer: over render.skip_above_words in raw HTML
    for _ in range(5 if host == PLAIN else 4):
        sentences = []
        for _ in range(4):
            words = [rng.choice(_WORDS if rng.random() < 0.7 else _SMALL) for _ in range(11)]
            sentences.append(" ".join(words).capitalize() + ".")
        paragraphs.append(" ".join(sentences))
    return title, tuple(paragraphs)


def _slug(path: str) -> str:
    return path.strip("/").replace("/", "-")


# ---------------------------------------------------------------------- rendering

# Draws {"title", "paragraphs"} into #story; text goes in by textContent, never as markup.
_DRAW_JS = (
    "function atlasDraw(d){var s=document.getElementById('story');"
    "var h=document.createElement('h1');h.textContent=d.title;s.appendChild(h);"
    "d.paragraphs.forEach(function(t){var p=document.createElement('p');p.textContent=t;"
    "s.appendChild(p);});s.setAttribute('data-drawn','1');}"
)


def _loader(path: str, canary_port: int) -> str:
    """The page's own script: where its article comes from, and what else it reaches for."""
    kind, n = PAGES[path], path.rsplit("/", 1)[1]
    if kind == "xhr" and n == "1":
        return (
            f"fetch('/api/article/{n}.json').then(function(r){{return r.json();}}).then(atlasDraw);"
        )
    if kind == "xhr":
        return (
            "var x=new XMLHttpRequest();x.open('GET','/api/article/2.json');"
            "x.onload=function(){atlasDraw(JSON.parse(x.responseText));};x.send();"
        )
    if kind == "slow":
        return f"fetch('/api/slow/{n}.json').then(function(r){{return r.json();}}).then(atlasDraw);"
    title, paragraphs = _article(SCRIPTED, path)
    # base64, so no article word is a text node (or even a JS string) of the raw HTML
    packed = base64.b64encode(json.dumps({"title": title, "paragraphs": paragraphs}).encode())
    draw = f"atlasDraw(JSON.parse(atob('{packed.decode()}')));"
    if kind != "canary":
        return draw
    # after drawing, and every failure swallowed: a crawler blocking these loses nothing
    return draw + (
        f"try{{var c=new XMLHttpRequest();c.open('GET','http://127.0.0.1:{canary_port}"
        f"{CANARY_PATH}');c.onerror=function(){{}};c.send();}}catch(e){{}}"
        f"try{{fetch('{METADATA_URL}').catch(function(){{}});}}catch(e){{}}"
    )


def _shell(path: str, port: int, canary_port: int) -> bytes:
    ring = list(PAGES)
    after = ring[(ring.index(path) + 1) % len(ring)]
    drip = '<script async src="/drip/forever.js"></script>' if PAGES[path] == "never-loads" else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Gazette {escape(path)}</title>"
        '<link rel="stylesheet" href="/static/gazette.css">'
        "<style>@font-face{font-family:Gazette;src:url(/fonts/gazette.woff2) format('woff2')}"
        "#story{font-family:Gazette,serif}</style>\n</head>\n<body>\n"
        f'<nav><a href="/">/</a> <a href="{after}">{escape(after)}</a></nav>\n'
        '<main id="story"></main>\n'
        "<noscript>Enable JavaScript to read this edition.</noscript>\n"
        f'<img src="/img/{_slug(path)}.png" alt="">\n'
        f"<script>{_DRAW_JS}\n{_loader(path, canary_port)}</script>\n{drip}"
        f'<script async src="{url(CDN, FORBIDDEN_SCRIPT_PATH, port)}"></script>\n'
        "</body></html>\n"
    ).encode()


def _index(port: int) -> bytes:
    items = "".join(f'<li><a href="{p}">{escape(p)}</a></li>\n' for p in PAGES)
    items += f'<li><a href="{url(PLAIN, "/", port)}">{PLAIN}</a></li>\n'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>Gazette index</title></head>\n<body><h1>Index</h1>\n<ul>\n"
        f"{items}</ul>\n</body></html>\n"
    ).encode()


def _plain(path: str) -> bytes:
    script = ""
    if path == "/":
        items = "".join(f'<li><a href="{p}">{escape(p)}</a></li>\n' for p in PLAIN_PAGES)
        title, body = "The Ashgrove Almanac", f"<ul>\n{items}</ul>\n"
    else:
        title, paragraphs = _article(PLAIN, path)
        body = "".join(f"<p>{escape(p)}</p>\n" for p in paragraphs)
        body += '<p><a href="/">Back to the almanac</a></p>\n'
        # a script that draws nothing, as most sites have: the page class is measured
        script = '<script>document.documentElement.classList.add("js");</script>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>{script}</head>\n<body>\n<main><article>"
        f"<h1>{escape(title)}</h1>\n{body}</article></main>\n</body></html>\n"
    ).encode()


def _article_json(path: str) -> bytes:
    title, paragraphs = _article(SCRIPTED, path)
    return json.dumps({"title": title, "paragraphs": paragraphs}).encode()


async def drip_chunks() -> AsyncGenerator[bytes, None]:
    """A script body that never ends: a space every DRIP_INTERVAL_S until the client leaves."""
    yield _DRIP_HEAD
    while True:
        await asyncio.sleep(DRIP_INTERVAL_S)
        yield b" "


class Scripted:
    """Answers for the scripted origins; built once per server."""

    def __init__(self, canary_port: int = DEFAULT_CANARY_PORT) -> None:
        self.canary_port = canary_port

    @staticmethod
    def serves(host: str) -> bool:
        """Whether ``host`` (lowercase, no port) is a scripted origin."""
        return host in SCRIPTED_HOSTS

    async def answer(self, host: str, path_qs: str, port: int) -> Answer | Stream:
        """The answer to a GET or HEAD of ``path_qs`` on scripted ``host``."""
        path = path_qs.partition("?")[0]
        if path == "/robots.txt":
            return 200, {"Content-Type": _TEXT}, _CDN_ROBOTS if host == CDN else _ALLOW_ALL
        if host == CDN:
            if path == FORBIDDEN_SCRIPT_PATH:
                return 200, {"Content-Type": _JS}, _FORBIDDEN_JS
        elif host == PLAIN:
            if path == "/" or path in PLAIN_PAGES:
                return 200, {"Content-Type": _HTML}, _plain(path)
        else:
            return await self._scripted(path, port)
        return 404, {"Content-Type": _HTML}, _NOT_FOUND

    async def _scripted(self, path: str, port: int) -> Answer | Stream:
        if path == "/":
            return 200, {"Content-Type": _HTML}, _index(port)
        if path in PAGES:
            return 200, {"Content-Type": _HTML}, _shell(path, port, self.canary_port)
        if path in _API:
            return 200, {"Content-Type": _JSON}, _article_json(_API[path])
        if path == "/api/slow/1.json":
            await asyncio.sleep(SLOW_DELAY_S)
            return 200, {"Content-Type": _JSON}, _article_json("/slow/1")
        if path == "/drip/forever.js":
            return Stream(200, {"Content-Type": _JS}, drip_chunks())
        if path == "/static/gazette.css":
            return 200, {"Content-Type": "text/css; charset=utf-8"}, _CSS
        if path == "/fonts/gazette.woff2":
            return 200, {"Content-Type": "font/woff2"}, _FONT
        if path.startswith("/img/") and path.removeprefix("/img/").removesuffix(".png") in {
            _slug(p) for p in PAGES
        }:
            return 200, {"Content-Type": "image/png"}, _PNG
        return 404, {"Content-Type": _HTML}, _NOT_FOUND
