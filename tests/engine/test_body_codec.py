"""The body file's layout (body_codec): the body's zstd frame, then the extraction in a
skippable frame found from the file's end; bytes that do not add up are no extraction. The
files are read the way the store reads them (`BodyStore._embedded`: two reads from the end)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import zstandard

from atlas_pipeline.bodies import BodyStore, _slug, digest
from atlas_pipeline.body_codec import (
    HEADER_BYTES,
    SKIPPABLE_MAGIC,
    TAG,
    TRAILER_BYTES,
    extraction_frame,
    extraction_span,
    header_fits,
    pack,
    unpack,
)

BODY = b"<html><body><p>chip supply</p></body></html>" * 20
VERSION = "trafilatura/v1"
SLUG = _slug(VERSION)
OTHER_SLUG = _slug("trafilatura/v2")


def _read(root: Path, data: bytes) -> bytes | None:
    """What the store reads as the extraction of VERSION from a body file holding `data`."""
    store = BodyStore(root)
    key = digest(BODY)
    path = Path(store._file(key, ".zst"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return store._embedded(key, VERSION)


RAW = '{"text": "Grüße, 東京"}'.encode()


def test_the_frame_is_a_zstd_skippable_frame_with_the_json_and_a_trailer() -> None:
    frame = extraction_frame(SLUG, RAW)
    magic, size = struct.unpack_from("<II", frame)
    assert magic == SKIPPABLE_MAGIC and 0x184D2A50 <= magic <= 0x184D2A5F  # RFC 8878 3.1.2
    assert size == len(frame) - 8 == len(RAW) + 24
    assert frame[8 : 8 + len(RAW)] == RAW
    assert frame.endswith(struct.pack("<I", len(RAW)) + SLUG.encode() + TAG)


def test_a_body_file_gives_back_both(tmp_path: Path) -> None:
    data = pack(BODY) + extraction_frame(SLUG, RAW)
    assert unpack(data, ".zst") == BODY
    assert _read(tmp_path, data) == RAW
    assert zstandard.ZstdDecompressor().decompress(data) == BODY


def test_an_empty_extraction_is_still_one(tmp_path: Path) -> None:
    assert _read(tmp_path, pack(BODY) + extraction_frame(SLUG, b"")) == b""


def _cut(data: bytes) -> bytes:
    return data[:-1]


@pytest.mark.parametrize(
    ("case", "data"),
    [
        ("the body alone", pack(BODY)),
        ("an empty file", b""),
        ("another version's", pack(BODY) + extraction_frame(OTHER_SLUG, RAW)),
        ("a file cut short", _cut(pack(BODY) + extraction_frame(SLUG, RAW))),
        (
            "a trailer and no room for a frame header",
            b"x" * 7 + struct.pack("<I12s8s", 0, SLUG.encode(), TAG),
        ),
        # a body that merely ends like a trailer: the length points before the file, or at
        # bytes that are no skippable frame of that size
        ("a length past the start", b"x" * 64 + struct.pack("<I12s8s", 10**6, SLUG.encode(), TAG)),
        ("a length one past the start", b"x" * 64 + struct.pack("<I12s8s", 57, SLUG.encode(), TAG)),
        ("no frame header", b"\0" * 40 + struct.pack("<I12s8s", 4, SLUG.encode(), TAG)),
        (
            "a header of another size",
            struct.pack("<II", SKIPPABLE_MAGIC, 99)
            + RAW
            + struct.pack("<I12s8s", len(RAW), SLUG.encode(), TAG),
        ),
        (
            "another magic",
            struct.pack("<II", 0x184D2A50, len(RAW) + 24)
            + RAW
            + struct.pack("<I12s8s", len(RAW), SLUG.encode(), TAG),
        ),
    ],
)
def test_bytes_that_do_not_add_up_are_no_extraction(tmp_path: Path, case: str, data: bytes) -> None:
    assert _read(tmp_path, data) is None, case


def test_a_slug_must_be_twelve_ascii_characters() -> None:
    for bad in ("short", "0123456789abc", "0123456789aé"):
        with pytest.raises(ValueError, match="12 ASCII"):
            extraction_frame(bad, RAW)


def test_a_frame_is_found_from_the_files_end_without_its_body() -> None:
    """What a reader of a file does: the last 24 bytes and the size give the span, the 8
    bytes before it must be the frame's header; the body's bytes are never needed."""
    body_frame = pack(BODY)
    data = body_frame + extraction_frame(SLUG, RAW)
    span = extraction_span(data[-TRAILER_BYTES:], len(data), SLUG)
    assert span == (len(body_frame) + HEADER_BYTES, len(RAW))
    start, length = span
    assert header_fits(data[start - HEADER_BYTES : start], length)
    assert not header_fits(data[start - HEADER_BYTES : start], length + 1)
    # a size that is off (a file grown since it was measured) points at no header
    shifted = extraction_span(data[-TRAILER_BYTES:], len(data) + 1, SLUG)
    assert shifted == (start + 1, length)
    assert not header_fits(data[start + 1 - HEADER_BYTES : start + 1], length)
