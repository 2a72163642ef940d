"""What a body is, whatever its headers say: binary sniffing and charset detection."""

from __future__ import annotations

import pytest

from atlas_pipeline.fetcher import looks_binary
from atlas_pipeline.parsing import decode_html

TEXT = "<!doctype html><html><head><title>Crème brûlée</title></head><body>Ünïcödé</body></html>"


@pytest.mark.parametrize(
    "head",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        b"GIF89a\x01\x00\x01\x00",
        b"\xff\xd8\xff\xe0\x00\x10JFIF",
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3",
        b"PK\x03\x04\x14\x00\x00\x00",
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00",
        b"\x7fELF\x02\x01\x01\x00",
        b"MZ\x90\x00\x03\x00",
        b"<html>\x00\x00\x00\x01",  # a text start with NUL bytes after it
        b"abc\x01def",  # a control byte (ESC is allowed: ISO-2022-JP uses it)
        bytes(range(256)),
    ],
)
def test_binary_bodies_are_recognised(head: bytes) -> None:
    assert looks_binary(head)


@pytest.mark.parametrize(
    "head",
    [
        b"",
        b"<!doctype html><html><body>hi</body></html>",
        b"<html>\r\n\t<body>tabs, CR LF and form feeds\x0c are text</body></html>",
        TEXT.encode("utf-8"),
        TEXT.encode("latin-1"),
        TEXT.encode("utf-16"),  # with its byte-order mark
        b"\xef\xbb\xbf<html></html>",
    ],
)
def test_text_bodies_are_not_binary(head: bytes) -> None:
    assert not looks_binary(head)


def test_a_wrong_charset_label_loses_to_valid_utf8() -> None:
    text, used = decode_html(TEXT.encode("utf-8"), "iso-8859-1")
    assert used == "utf-8" and "Crème brûlée" in text


def test_a_legacy_page_is_decoded_with_its_label() -> None:
    text, used = decode_html(TEXT.encode("latin-1"), "iso-8859-1")
    assert used == "iso-8859-1" and "Crème brûlée" in text


def test_the_meta_charset_is_used_when_the_header_has_none() -> None:
    body = b'<meta charset="koi8-r"><p>' + "Привет".encode("koi8-r") + b"</p>"
    text, used = decode_html(body, None)
    assert used == "koi8-r" and "Привет" in text


def test_an_unlabelled_legacy_page_falls_back_to_windows_1252() -> None:
    text, used = decode_html("Señor “quotes”".encode("cp1252"), None)
    assert used == "windows-1252" and text == "Señor “quotes”"


def test_byte_order_marks_win() -> None:
    assert decode_html("\ufeffhé".encode("utf-16-le"), "iso-8859-1") == ("hé", "utf-16-le")
    assert decode_html(b"\xef\xbb\xbfh\xc3\xa9", "iso-8859-1") == ("hé", "utf-8")


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data)


def test_the_inflater_never_produces_more_than_asked() -> None:
    import zlib

    from atlas_pipeline.fetcher import Inflater

    bomb = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    wire = bomb.compress(b" " * (64 << 20)) + bomb.flush()  # 64 MiB in ~64 KB
    out = Inflater("gzip")(wire, 1000)
    assert len(out) == 1000
    assert Inflater("gzip")(_gzip(b"a") + _gzip(b"b"), 100) == b"ab"  # members in a row
    assert Inflater("deflate")(zlib.compress(b"zlib-wrapped"), 100) == b"zlib-wrapped"
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    assert Inflater("deflate")(raw.compress(b"raw deflate") + raw.flush(), 100) == b"raw deflate"
    assert Inflater("identity")(b"as is", 1) == b"as is"
    with pytest.raises(ValueError, match="br"):
        Inflater("br")
    with pytest.raises(zlib.error):
        Inflater("gzip")(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff", 100)
