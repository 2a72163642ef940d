"""Hostile origins: what the open internet throws at a fetcher, on loopback (`atlas web --hostile`).

bombs.example.test
  /gzip-bomb      text/html with Content-Encoding: gzip; ~1 MB on the wire inflates to 1 GiB
                  (deflate cannot beat ~1032:1, so 1 GiB needs about 1 MB)
  /huge           a 20 MiB text/html page, chunked (no Content-Length at all)
  /drip           text/html, one byte per second until the client goes away
  /binary         PNG bytes labelled text/html (/binary-zip and /binary-elf: ZIP and ELF)
  /wrong-charset  header says charset=iso-8859-1; the body is UTF-8 with <meta charset="utf-8">
  /big-headers    ~100 KB of response headers in 100 fields of 1 KB (each under per-line limits)
  /long-header    one response header line of 100 KB
redirects.example.test
  /to-metadata    302 to http://169.254.169.254/latest/meta-data/; /to-metadata-v6 and
                  /to-metadata-gcp to fd00:ec2::254 and metadata.google.internal
  /to-private     302 to http://10.0.0.1/admin; /to-private-192, /to-private-172 and
                  /to-shared to 192.168.0.1, 172.16.0.1 and 100.64.0.1
  /to-file        302 to file:///etc/passwd
  /to-canary      302 to the canary by loopback IP literal (http://127.0.0.1:CANARY/...)
  /loop-a /loop-b 302 to each other (relative Locations)
  /chain/1..8     seven hops (301, 302, 303, 307, 308, 301, 302) to /chain/8, a 200 page
  /to-disallowed  301 across origins to docs-b /search?q=install, which its robots.txt disallows
links.example.test
  /               links to the canary port in many spellings of loopback, and to cloud metadata
                  and private addresses

Each host has an index page at / linking to its cases and a robots.txt allowing everything,
so robots never hides a case (links.example.test's robots.txt is a 301 to bombs', so the
crawler's hop into another origin is paced by that origin's clock). The canary (server.py) is not one of these hosts: it listens on
a port of its own and must never be in a crawl's `resolve` map.
"""

from __future__ import annotations

import asyncio
import random
import struct
import zlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from html import escape

from .site import FIXED_HOSTS

BOMBS = "bombs.example.test"
REDIRECTS = "redirects.example.test"
LINKS = "links.example.test"
HOSTILE_HOSTS: tuple[str, ...] = (BOMBS, REDIRECTS, LINKS)
"""Hostile origin hosts: map these (and only these) to loopback in a crawl's `resolve`."""

DEFAULT_CANARY_PORT = 8089
"""Port `atlas canary` listens on and the hostile pages point at unless told otherwise."""

BOMB_INFLATED_BYTES = 1 << 30  # 1 GiB of spaces after a short HTML prefix
HUGE_BYTES = 20 * 1024 * 1024  # 20 MiB
DRIP_INTERVAL_S = 1.0  # one byte per interval
BINARY_BYTES = 64 * 1024  # body after the binary signature
BIG_HEADER_FIELDS = 100  # fields of BIG_HEADER_FIELD_BYTES each, ~100 KB in all
BIG_HEADER_FIELD_BYTES = 1024
LONG_HEADER_BYTES = 100 * 1024  # one header value
CHAIN_HOPS = 7
CHAIN_STATUSES = (301, 302, 303, 307, 308, 301, 302)  # hop n answers CHAIN_STATUSES[n - 1]

DISALLOWED_HOST = FIXED_HOSTS[1]  # docs-b.example.test
DISALLOWED_PATH = "/search?q=install"
"""Target of /to-disallowed: docs-b's robots.txt disallows /search to every agent."""

BINARY_SIGNATURES: dict[str, bytes] = {
    "/binary": b"\x89PNG\r\n\x1a\n",
    "/binary-zip": b"PK\x03\x04",
    "/binary-elf": b"\x7fELF",
}

WRONG_CHARSET_TEXT = "Crème brûlée in Zürich, São Paulo and Łódź: naïve façades, Ελληνικά, 日本語"
"""Non-ASCII text /wrong-charset sends as UTF-8 under an iso-8859-1 Content-Type."""

METADATA_URLS: tuple[str, ...] = (
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://metadata/computeMetadata/v1/",
    "http://169.254.170.2/v2/credentials",  # ECS task credentials
    "http://100.100.100.200/latest/meta-data/",  # Alibaba Cloud
    "http://0xa9fea9fe/latest/meta-data/",  # 169.254.169.254 in hex
    "http://2852039166/latest/meta-data/",  # 169.254.169.254 in decimal
    "http://[::ffff:169.254.169.254]/latest/meta-data/",
)
"""Cloud metadata endpoints, in a few spellings."""

PRIVATE_URLS: tuple[str, ...] = (
    "http://10.0.0.1/admin",
    "http://192.168.0.1/",
    "http://172.16.0.1/",
    "http://100.64.0.1/",  # shared address space (carrier-grade NAT)
    "http://[fc00::1]/",
    "http://[fe80::1]/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
)
"""Private, shared, link-local, multicast and broadcast destinations."""

# Loopback spellings; "{p}" is the canary port. Sources: WHATWG URL host parsing (IPv4
# number forms, IDNA mapping, tab/newline stripping, backslash as slash), RFC 4291 (mapped and
# compatible IPv6), RFC 6052 (NAT64), RFC 3056 (6to4), RFC 6761 (.localhost).
_LOOPBACK_TEMPLATES: tuple[str, ...] = (
    "http://127.0.0.1:{p}/",
    "http://localhost:{p}/",
    "http://LOCALHOST:{p}/",
    "http://localhost.:{p}/",
    "http://canary.localhost:{p}/",
    "http://2130706433:{p}/",
    "http://0x7f000001:{p}/",
    "http://0x7f.0x0.0x0.0x1:{p}/",
    "http://0x7f.1:{p}/",
    "http://0177.0.0.1:{p}/",
    "http://0177.0000.0000.0001:{p}/",
    "http://017700000001:{p}/",
    "http://127.1:{p}/",
    "http://127.0.1:{p}/",
    "http://127.000.000.001:{p}/",
    "http://127.0.0.1.:{p}/",
    "http://127.127.127.127:{p}/",
    "http://0.0.0.0:{p}/",
    "http://0:{p}/",
    "http://[::1]:{p}/",
    "http://[0:0:0:0:0:0:0:1]:{p}/",
    "http://[::]:{p}/",
    "http://[::ffff:127.0.0.1]:{p}/",
    "http://[::ffff:7f00:1]:{p}/",
    "http://[0:0:0:0:0:ffff:127.0.0.1]:{p}/",
    "http://[::127.0.0.1]:{p}/",
    "http://[64:ff9b::127.0.0.1]:{p}/",
    "http://[64:ff9b::7f00:1]:{p}/",
    "http://[2002:7f00:1::]:{p}/",
    "http://user@127.0.0.1:{p}/",
    "http://user:secret@localhost:{p}/",
    "http://www.example.com@127.0.0.1:{p}/",
    "http://127.0.0.1:{p}#@www.example.com/",
    "http://127.0.0.1:{p}\\@www.example.com/",
    "http://%31%32%37.0.0.1:{p}/",
    "http://１２７.０.０.１:{p}/",
    "http://127。0。0。1:{p}/",
    "http://127.0.0.1:0{p}/",
    "//127.0.0.1:{p}/",
    "HTTP://127.0.0.1:{p}/",
    "ht\ttp://127.0.0.1:{p}/",
    "https://127.0.0.1:{p}/",
    "http://localtest.me:{p}/",  # public DNS names that answer 127.0.0.1
    "http://127.0.0.1.nip.io:{p}/",
)

Answer = tuple[int, dict[str, str], bytes]

_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_ROBOTS = b"User-agent: *\nAllow: /\n"
_HOP_ONLY = frozenset({"/loop-b", *(f"/chain/{n}" for n in range(2, CHAIN_HOPS + 1))})
_CHUNK = 64 * 1024  # bytes per write of a streamed body
_DRIP_TEXT = (
    b"<!DOCTYPE html>\n<html><head><title>Drip</title></head><body><p>" + b"still loading " * 8
)
# Bomb: a gzip member made of one compressed block repeated. A full flush ends each block
# byte-aligned with no reference to earlier data, so the copies concatenate into one valid
# deflate stream: 1 MiB of input compressed once instead of 1024 times.
_BOMB_PREFIX = b"<!DOCTYPE html>\n<html><head><title>Bomb</title></head><body>\n"
_BOMB_BLOCK_BYTES = 1 << 20
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # deflate, mtime 0, best, OS unknown


def url(host: str, path: str, port: int) -> str:
    """``http://HOST:PORT/path`` on the sandbox's port."""
    return f"http://{host}:{port}{path}"


def seed_urls(port: int) -> list[str]:
    """Every hostile origin's index page on the sandbox's port."""
    return [url(host, "/", port) for host in HOSTILE_HOSTS]


def loopback_urls(canary_port: int) -> list[str]:
    """The links page's loopback spellings, every one aimed at the canary port."""
    return [t.format(p=canary_port) for t in _LOOPBACK_TEMPLATES]


def redirects(port: int, canary_port: int) -> dict[str, tuple[int, str]]:
    """Path -> (status, Location) for every redirect of redirects.example.test."""
    table: dict[str, tuple[int, str]] = {
        "/to-metadata": (302, METADATA_URLS[0]),
        "/to-metadata-v6": (302, METADATA_URLS[1]),
        "/to-metadata-gcp": (302, METADATA_URLS[2]),
        "/to-private": (302, PRIVATE_URLS[0]),
        "/to-private-192": (302, PRIVATE_URLS[1]),
        "/to-private-172": (302, PRIVATE_URLS[2]),
        "/to-shared": (302, PRIVATE_URLS[3]),
        "/to-file": (302, "file:///etc/passwd"),
        "/to-canary": (302, f"http://127.0.0.1:{canary_port}/from-redirect"),
        "/loop-a": (302, "/loop-b"),
        "/loop-b": (302, "/loop-a"),
        "/to-disallowed": (301, url(DISALLOWED_HOST, DISALLOWED_PATH, port)),
    }
    for n, status in enumerate(CHAIN_STATUSES, start=1):
        # Alternate absolute and root-relative Locations, as real chains mix them.
        target = f"/chain/{n + 1}"
        table[f"/chain/{n}"] = (status, url(REDIRECTS, target, port) if n % 2 else target)
    return table


@dataclass(frozen=True)
class Stream:
    """A streamed answer: status and headers first, then the body chunk by chunk."""

    status: int
    headers: dict[str, str]
    chunks: AsyncGenerator[bytes, None]


@dataclass(frozen=True)
class _GzipBomb:
    head: bytes  # gzip header + compressed prefix
    block: bytes  # one compressed _BOMB_BLOCK_BYTES of spaces, repeated
    repeats: int
    tail: bytes  # final deflate block + gzip trailer (CRC-32, size)

    @property
    def size(self) -> int:
        return len(self.head) + len(self.block) * self.repeats + len(self.tail)


def _make_gzip_bomb() -> _GzipBomb:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: we write gzip framing
    head = _GZIP_HEADER + compressor.compress(_BOMB_PREFIX) + compressor.flush(zlib.Z_FULL_FLUSH)
    spaces = b" " * _BOMB_BLOCK_BYTES
    block = compressor.compress(spaces) + compressor.flush(zlib.Z_FULL_FLUSH)
    repeats = BOMB_INFLATED_BYTES // _BOMB_BLOCK_BYTES
    crc = zlib.crc32(_BOMB_PREFIX)
    for _ in range(repeats):
        crc = zlib.crc32(spaces, crc)
    size = len(_BOMB_PREFIX) + repeats * _BOMB_BLOCK_BYTES
    tail = compressor.flush(zlib.Z_FINISH) + struct.pack("<II", crc, size & 0xFFFFFFFF)
    return _GzipBomb(head, block, repeats, tail)


def _index(title: str, links: list[tuple[str, str]]) -> bytes:
    items = "".join(
        f'<li><a href="{escape(href)}">{escape(text)}</a></li>\n' for href, text in links
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}'
        f"</title></head>\n<body><h1>{escape(title)}</h1>\n<ul>\n{items}</ul>\n</body></html>\n"
    ).encode()


_NOT_FOUND = (
    b'<!DOCTYPE html>\n<html lang="en"><head><title>Not found</title></head>'
    b"<body><h1>404 Not Found</h1></body></html>\n"
)


class Hostile:
    """Answers for the hostile origins; built once per server, bodies made on first use."""

    def __init__(self, canary_port: int = DEFAULT_CANARY_PORT) -> None:
        self.canary_port = canary_port
        self._bomb: _GzipBomb | None = None
        self._bomb_lock = asyncio.Lock()
        self._huge_chunk: bytes | None = None

    @staticmethod
    def serves(host: str) -> bool:
        """Whether ``host`` (lowercase, no port) is a hostile origin."""
        return host in HOSTILE_HOSTS

    async def answer(self, host: str, path_qs: str, port: int) -> Answer | Stream:
        """The answer to a GET or HEAD of ``path_qs`` on hostile ``host``."""
        path = path_qs.partition("?")[0]
        if path == "/robots.txt":
            if host == LINKS:  # a robots.txt that moved to another origin, as www -> apex does
                return 301, {"Location": url(BOMBS, "/robots.txt", port)}, b"moved\n"
            return 200, {"Content-Type": _TEXT}, _ROBOTS
        if host == BOMBS:
            return await self._bombs(path)
        if host == REDIRECTS:
            return self._redirects(path, port)
        if host == LINKS and path == "/":
            return 200, {"Content-Type": _HTML}, self._links_page()
        return 404, {"Content-Type": _HTML}, _NOT_FOUND

    # ------------------------------------------------------------------ bombs

    async def _bombs(self, path: str) -> Answer | Stream:
        if path == "/":
            cases = ["/gzip-bomb", "/huge", "/drip", *BINARY_SIGNATURES, "/wrong-charset"]
            cases += ["/big-headers", "/long-header"]
            return 200, {"Content-Type": _HTML}, _index("Bombs", [(c, c) for c in cases])
        if path == "/gzip-bomb":
            bomb = await self._gzip_bomb()
            headers = {"Content-Type": _HTML, "Content-Encoding": "gzip"}
            headers["Content-Length"] = str(bomb.size)  # true: the bytes on the wire
            return Stream(200, headers, _bomb_chunks(bomb))
        if path == "/huge":
            return Stream(200, {"Content-Type": _HTML}, self._huge_chunks())
        if path == "/drip":
            return Stream(200, {"Content-Type": _HTML}, drip_chunks())
        if path in BINARY_SIGNATURES:
            noise = random.Random(f"atlas-hostile{path}").randbytes(BINARY_BYTES)
            return 200, {"Content-Type": _HTML}, BINARY_SIGNATURES[path] + noise
        if path == "/wrong-charset":
            body = (
                '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                f"<title>Wrong charset</title></head>\n<body><p>{WRONG_CHARSET_TEXT}</p>"
                "</body></html>\n"
            )
            return 200, {"Content-Type": "text/html; charset=iso-8859-1"}, body.encode()
        if path == "/big-headers":
            headers = {"Content-Type": _HTML}
            for i in range(BIG_HEADER_FIELDS):
                headers[f"X-Atlas-Filler-{i:03d}"] = _filler(i, BIG_HEADER_FIELD_BYTES)
            return 200, headers, _index("Big headers", [("/", "Bombs")])
        if path == "/long-header":
            headers = {"Content-Type": _HTML, "X-Atlas-Long": _filler(0, LONG_HEADER_BYTES)}
            return 200, headers, _index("Long header", [("/", "Bombs")])
        return 404, {"Content-Type": _HTML}, _NOT_FOUND

    async def _gzip_bomb(self) -> _GzipBomb:
        async with self._bomb_lock:
            if self._bomb is None:
                # ~0.3 s of CPU (mostly the CRC of 1 GiB): off the event loop.
                self._bomb = await asyncio.to_thread(_make_gzip_bomb)
            return self._bomb

    def _huge_body_chunk(self) -> bytes:
        if self._huge_chunk is None:
            rng = random.Random("atlas-hostile-huge")
            words = ("lorem", "ipsum", "dolor", "sit", "amet", "crawler", "bound", "page")
            lines = []
            for _ in range(_CHUNK // 128):
                line = "<p>" + " ".join(rng.choices(words, k=30))
                lines.append(line[: 128 - 5].ljust(123) + "</p>\n")
            self._huge_chunk = "".join(lines).encode()
        return self._huge_chunk

    async def _huge_chunks(self) -> AsyncGenerator[bytes, None]:
        head = b'<!DOCTYPE html>\n<html lang="en"><head><title>Huge</title></head><body>\n'
        tail = b"</body></html>\n"
        chunk = self._huge_body_chunk()
        middle = HUGE_BYTES - len(head) - len(tail)
        yield head
        for _ in range(middle // len(chunk)):
            yield chunk
        if middle % len(chunk):
            yield b"\n" * (middle % len(chunk))
        yield tail

    # ------------------------------------------------------------------ redirects

    def _redirects(self, path: str, port: int) -> Answer:
        table = redirects(port, self.canary_port)
        if path == "/":
            # only where chains start, as a site links them: later hops are reached by hopping
            starts = [p for p in table if p not in _HOP_ONLY]
            return 200, {"Content-Type": _HTML}, _index("Redirects", [(p, p) for p in starts])
        if path == f"/chain/{CHAIN_HOPS + 1}":
            return 200, {"Content-Type": _HTML}, _index("End of the chain", [("/", "Redirects")])
        if path in table:
            status, location = table[path]
            return status, {"Location": location, "Content-Type": _TEXT}, b"redirecting\n"
        return 404, {"Content-Type": _HTML}, _NOT_FOUND

    # ------------------------------------------------------------------ links

    def _links_page(self) -> bytes:
        targets = [*loopback_urls(self.canary_port), *METADATA_URLS, *PRIVATE_URLS]
        return _index("Links to places a crawler must not go", [(t, t) for t in targets])


def _filler(seed: int, size: int) -> str:
    """``size`` printable ASCII characters, different per seed (so no two fields are equal)."""
    return random.Random(f"atlas-hostile-filler-{seed}").randbytes(size // 2).hex()[:size]


async def _bomb_chunks(bomb: _GzipBomb) -> AsyncGenerator[bytes, None]:
    yield bomb.head
    # Batch the ~1 KB blocks into writes of about _CHUNK bytes.
    per_write = max(1, _CHUNK // len(bomb.block))
    batch = bomb.block * per_write
    full, rest = divmod(bomb.repeats, per_write)
    for _ in range(full):
        yield batch
    if rest:
        yield bomb.block * rest
    yield bomb.tail


async def drip_chunks() -> AsyncGenerator[bytes, None]:
    i = 0
    while True:  # until the client goes away: the server's write then fails
        yield _DRIP_TEXT[i % len(_DRIP_TEXT) : i % len(_DRIP_TEXT) + 1]
        i += 1
        await asyncio.sleep(DRIP_INTERVAL_S)
