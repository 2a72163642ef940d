"""Page-level robots directives, on loopback: one page per form of `<meta name="robots">`, a
meta tag naming a crawler, and the `X-Robots-Tag` header (SandboxServer(directives=True)).

directives.example.test  (the Quillmoor Courier)
  /                         an index page linking every page below (no directives)
  /robots.txt               allows everything
  /directives/<name>        an article with the directive of <name> (table ``PAGES``), linking
                            to exactly one page of its own, /targets/<name>
  /targets/<name>           an article linking nowhere (no directives)

  plain                     nothing: indexed, its link followed (the control)
  meta-noindex              <meta name="robots" content="noindex">
  meta-nofollow             <meta name="ROBOTS" content="nofollow">
  meta-atlasbot-none        <meta name="AtlasBot" content="none">  (noindex, nofollow)
  meta-otherbot-noindex     <meta name="otherbot" content="noindex">  (not for us: indexed)
  header-noindex            X-Robots-Tag: noindex
  header-atlasbot-nofollow  X-Robots-Tag: atlasbot: nofollow
  header-otherbot-noindex   X-Robots-Tag: otherbot: noindex  (not for us: indexed)
  header-several            X-Robots-Tag: otherbot: nofollow  and  X-Robots-Tag: noindex, all
                            (two headers: noindex for us, its link followed)
  turns-noindex             nothing at generation 0; <meta name="robots" content="noindex">
                            from generation 1 on (a delivered page withdrawn)

Everything else answers 404. Bodies depend on (path, whether the page says noindex) only.
Ground truth for tests: ``pages``, ``says``, ``target``, ``indexed``, ``followed``.
"""

from __future__ import annotations

import functools
import threading
from html import escape

from multidict import CIMultiDict

HOST = "directives.example.test"
DIRECTIVES_HOSTS: tuple[str, ...] = (HOST,)
"""Directive origin hosts: map these to loopback in a crawl's `resolve`."""
TOKEN = "AtlasBot"  # the product token these pages address (site.DEFAULT_USER_AGENT_TOKEN)
TURNS = "turns-noindex"

Answer = tuple[int, CIMultiDict[str], bytes]

# name -> (meta tags, X-Robots-Tag headers, noindex for us, nofollow for us)
PAGES: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...], bool, bool]] = {
    "plain": ((), (), False, False),
    "meta-noindex": ((("robots", "noindex"),), (), True, False),
    "meta-nofollow": ((("ROBOTS", "nofollow"),), (), False, True),
    "meta-atlasbot-none": (((TOKEN, "none"),), (), True, True),
    "meta-otherbot-noindex": ((("otherbot", "noindex"),), (), False, False),
    "header-noindex": ((), ("noindex",), True, False),
    "header-atlasbot-nofollow": ((), ("atlasbot: nofollow",), False, True),
    "header-otherbot-noindex": ((), ("otherbot: noindex",), False, False),
    "header-several": ((), ("otherbot: nofollow", "noindex, all"), True, False),
    TURNS: ((), (), False, False),  # generation 0; noindex by meta from generation 1
}

_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_NOT_FOUND = (
    b'<!DOCTYPE html>\n<html lang="en"><head><title>Not found</title></head>'
    b"<body><h1>404 Not Found</h1></body></html>\n"
)
_SITE = "The Quillmoor Courier"
_SENTENCES = (
    "The harbour committee met on Tuesday to discuss the spring repairs to the sea wall.",
    "Volunteers counted more than two hundred wading birds along the estuary this week.",
    "A new timetable for the ferry begins next month, with an extra crossing at dawn.",
    "The library has extended its opening hours on Thursdays until late in the evening.",
    "Farmers in the valley reported an early harvest after a warm and settled summer.",
    "Residents of the old quarter asked the council to restore the cobbled lanes.",
)


# ---------------------------------------------------------------------- ground truth


def pages() -> list[str]:
    """Paths of the directive pages, in index order."""
    return [f"/directives/{name}" for name in PAGES]


def target(path: str) -> str:
    """The one page a directive page links to (KeyError for another path)."""
    name = path.removeprefix("/directives/")
    if name not in PAGES:
        raise KeyError(path)
    return f"/targets/{name}"


def says(path: str, generation: int = 0) -> tuple[bool, bool]:
    """(noindex, nofollow) the page at ``path`` says to AtlasBot at ``generation``."""
    name = path.removeprefix("/directives/")
    _, _, noindex, nofollow = PAGES[name]
    if name == TURNS and generation >= 1:
        return True, False
    return noindex, nofollow


def indexed(generation: int = 0) -> set[str]:
    """Paths a crawler honouring the directives indexes at ``generation`` (the index page
    and the targets included)."""
    out = {"/", *(target(p) for p in pages())}
    return out | {p for p in pages() if not says(p, generation)[0]}


def followed(generation: int = 0) -> set[str]:
    """Target paths a crawler honouring nofollow reaches (from pages crawled at generation)."""
    return {target(p) for p in pages() if not says(p, generation)[1]}


# ---------------------------------------------------------------------- rendering


def _article(title: str, head: str, body_links: str, seed: int) -> bytes:
    paragraphs = "".join(
        f"<p>{escape(' '.join(_SENTENCES[(seed + i + k) % len(_SENTENCES)] for k in range(4)))}"
        f" ({escape(title)}, part {i + 1}.)</p>\n"
        for i in range(3)
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} | {_SITE}</title>{head}</head>\n<body>\n<main><article>"
        f"<h1>{escape(title)}</h1>\n{paragraphs}{body_links}</article></main>\n</body></html>\n"
    ).encode()


@functools.lru_cache(maxsize=64)
def _render(path: str, noindex_meta: bool) -> bytes | None:
    if path == "/":
        items = "".join(f'<li><a href="{p}">{escape(p)}</a></li>' for p in pages())
        return _article("Every directive", "", f"<ul>{items}</ul>\n", 0)
    kind, _, name = path.strip("/").partition("/")
    if name not in PAGES or kind not in ("directives", "targets"):
        return None
    seed = list(PAGES).index(name)
    if kind == "targets":
        return _article(f"Target of {name}", "", "", seed + 3)
    meta = PAGES[name][0] + ((("robots", "noindex"),) if noindex_meta else ())
    head = "".join(f'<meta name="{escape(n)}" content="{escape(c)}">' for n, c in meta)
    link = f'<p>Read on: <a href="/targets/{name}">the follow-up to {escape(name)}</a></p>\n'
    return _article(f"Directive {name}", head, link, seed)


class DirectivePages:
    """Answers for the directive origin and its generation counter; built once per server."""

    def __init__(self) -> None:
        self.generation = 0
        self._lock = threading.Lock()

    @staticmethod
    def serves(host: str) -> bool:
        """Whether ``host`` (lowercase, no port) is a directive origin."""
        return host in DIRECTIVES_HOSTS

    def bump_generation(self) -> int:
        """Advance the generation (turns-noindex says noindex from 1 on); returns it."""
        with self._lock:
            self.generation += 1
            return self.generation

    def answer(self, host: str, path_qs: str) -> Answer:
        """The answer to a GET or HEAD of ``path_qs`` on ``host``."""
        path = path_qs.partition("?")[0]
        if path == "/robots.txt":
            return 200, CIMultiDict({"Content-Type": _TEXT}), b"User-agent: *\nAllow: /\n"
        with self._lock:
            generation = self.generation
        name = path.removeprefix("/directives/")
        turned = name == TURNS and says(path, generation)[0]
        body = _render(path, turned)
        if body is None:
            return 404, CIMultiDict({"Content-Type": _HTML}), _NOT_FOUND
        headers: CIMultiDict[str] = CIMultiDict({"Content-Type": _HTML})
        if path.startswith("/directives/"):
            for value in PAGES[name][1]:
                headers.add("X-Robots-Tag", value)
        return 200, headers, body
