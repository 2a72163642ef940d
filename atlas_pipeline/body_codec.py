"""How a body is laid out in its stored file: one zstd frame (level 1) of the raw bytes, and,
when the worker that parsed it wrote it, the extraction after it in a zstd skippable frame.

Why the extraction rides in the body's file: a folder store used to take two files a page
(`<key>.zst` and `<key>.extract-<version>.json`), each a create, a write and a rename. On the
sandbox's pages the second file cost the extraction worker about 0.4 ms of a 10 ms page
(most of it kernel time), the largest thing a worker did beyond the parse itself. Written
together, a page costs one file.

Why a skippable frame: the zstd format (RFC 8878, 3.1.2) lets any frame be followed by a
frame of magic 0x184D2A50-0x184D2A5F whose bytes every decoder passes over, so the file stays
a plain zstd file of the body for every tool (`zstd -d`, zstandard's `decompress`, which stops
at the first frame's end) and older Atlas readers alike.

The skippable frame's payload: the extraction's UTF-8 JSON, then a fixed 24-byte trailer
(the JSON's length as a little-endian u32, the 12-character slug of its extraction version,
and TAG), so a reader finds it from the file's end: two small reads, not the body's bytes.
Extractions written later (another version, a re-extraction, an object store) stay in their
own files.
"""

from __future__ import annotations

import gzip
import struct
import threading

import zstandard

BODY_SUFFIX = ".zst"  # what a put writes
LEGACY_SUFFIX = ".gz"  # what stores written before zstd hold: read, never written

SKIPPABLE_MAGIC = 0x184D2A5A  # one of the sixteen skippable-frame magics (RFC 8878 3.1.2)
TAG = b"atlas-x1"  # ends a body file that holds its extraction
_HEADER = struct.Struct("<II")  # skippable frame: magic, payload length
_TRAILER = struct.Struct("<I12s8s")  # JSON length, version slug, TAG
HEADER_BYTES, TRAILER_BYTES = _HEADER.size, _TRAILER.size
SLUG_CHARS = 12

# a zstd context may not be shared by threads at once (a batch's body thread and a worker's)
_CODECS = threading.local()


def pack(body: bytes) -> bytes:
    """A body as it is stored: one zstd frame (level 1) that records its size."""
    try:
        compressor: zstandard.ZstdCompressor = _CODECS.compressor
    except AttributeError:
        compressor = _CODECS.compressor = zstandard.ZstdCompressor(level=1)
    return compressor.compress(body)


def unpack(data: bytes, suffix: str) -> bytes:
    """Stored bytes back to the body, by the suffix of the file they came from. The first
    frame is the body; an extraction frame after it is not decoded."""
    if suffix == LEGACY_SUFFIX:
        return gzip.decompress(data)
    try:
        decompressor: zstandard.ZstdDecompressor = _CODECS.decompressor
    except AttributeError:
        decompressor = _CODECS.decompressor = zstandard.ZstdDecompressor()
    return decompressor.decompress(data)


def extraction_frame(slug: str, raw_json: bytes) -> bytes:
    """The skippable frame that carries an extraction (`raw_json`) of version `slug`, to be
    written right after the body's frame."""
    if len(slug) != SLUG_CHARS or not slug.isascii():
        raise ValueError(f"an extraction version slug is {SLUG_CHARS} ASCII characters: {slug!r}")
    trailer = _TRAILER.pack(len(raw_json), slug.encode("ascii"), TAG)
    return _HEADER.pack(SKIPPABLE_MAGIC, len(raw_json) + TRAILER_BYTES) + raw_json + trailer


def extraction_span(tail: bytes, size: int, slug: str) -> tuple[int, int] | None:
    """Where a body file of `size` bytes, whose last TRAILER_BYTES are `tail`, holds the JSON
    of its extraction of version `slug`: (offset, length). None: no extraction frame,
    another version's, or a length that points before the file's start (a body that merely
    ends like a trailer). The frame's header (HEADER_BYTES before the offset) is the
    caller's to check with `header_fits`: a reader of a file reads only what it needs."""
    if size < HEADER_BYTES + TRAILER_BYTES or len(tail) != TRAILER_BYTES or not tail.endswith(TAG):
        return None
    length, held, _ = _TRAILER.unpack(tail)
    start = size - TRAILER_BYTES - length
    if start < HEADER_BYTES or held != slug.encode("ascii"):
        return None
    return start, length


def header_fits(header: bytes, length: int) -> bool:
    """Whether `header` is the skippable frame header of an extraction of `length` bytes."""
    return len(header) == HEADER_BYTES and _HEADER.unpack(header) == (
        SKIPPABLE_MAGIC,
        length + TRAILER_BYTES,
    )
