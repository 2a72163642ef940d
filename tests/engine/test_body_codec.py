"""The body file's layout (body_codec): the body's zstd frame, then the extraction in a
skippable frame found from the file's end; bytes that do not add up are no extraction."""

from __future__ import annotations

import struct

import pytest
import zstandard

from atlas_pipeline.body_codec import (
    HEADER_BYTES,
    SKIPPABLE_MAGIC,
    TAG,
    TRAILER_BYTES,
    embedded_extraction,
    extraction_frame,
    extraction_span,
    header_fits,
    pack,
    unpack,
)

BODY = b"<html><body><p>chip supply</p></body></html>" * 20
SLUG = "0123456789ab"
RAW = '{"text": "Grüße, 東京"}'.encode()


def test_the_frame_is_a_zstd_skippable_frame_with_the_json_and_a_trailer() -> None:
    frame = extraction_frame(SLUG, RAW)
    magic, size = struct.unpack_from("<II", frame)
    assert magic == SKIPPABLE_MAGIC and 0x184D2A50 <= magic <= 0x184D2A5F  # RFC 8878 3.1.2
    assert size == len(frame) - 8 == len(RAW) + 24
    assert frame[8 : 8 + len(RAW)] == RAW
    assert frame.endswith(struct.pack("<I", len(RAW)) + SLUG.encode() + TAG)


def test_a_body_file_gives_back_both() -> None:
    data = pack(BODY) + extraction_frame(SLUG, RAW)
    assert unpack(data, ".zst") == BODY
    found = embedded_extraction(data, SLUG)
    assert found is not None and bytes(found) == RAW
    assert zstandard.ZstdDecompressor().decompress(data) == BODY


def test_an_empty_extraction_is_still_one() -> None:
    found = embedded_extraction(pack(BODY) + extraction_frame(SLUG, b""), SLUG)
    assert found is not None and bytes(found) == b""


def _cut(data: bytes) -> bytes:
    return data[:-1]


@pytest.mark.parametrize(
    ("case", "data"),
    [
        ("the body alone", pack(BODY)),
        ("an empty file", b""),
        ("another version's", pack(BODY) + extraction_frame("ba9876543210", RAW)),
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
def test_bytes_that_do_not_add_up_are_no_extraction(case: str, data: bytes) -> None:
    assert embedded_extraction(data, SLUG) is None, case


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
