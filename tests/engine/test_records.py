"""The typed fetch records hold exactly the lake's columns, and what the store serializes is
what the lake write reads back."""

from __future__ import annotations

import json

import polars as pl

from atlas_pipeline.lake_schema import SCHEMAS
from atlas_pipeline.records import (
    DOCUMENT_FIELDS,
    FETCH_FIELDS,
    STORE_ONLY_FIELDS,
    WRITE_COLUMNS,
    Document,
    FetchRecord,
)


def test_a_fetch_record_holds_the_fetches_columns() -> None:
    assert set(FETCH_FIELDS) - STORE_ONLY_FIELDS == set(SCHEMAS["fetches"]) - WRITE_COLUMNS


def test_a_document_holds_the_documents_columns() -> None:
    assert set(DOCUMENT_FIELDS) == set(SCHEMAS["documents"]) - WRITE_COLUMNS


def test_records_serialize_to_rows_the_lake_schema_takes() -> None:
    fetch = FetchRecord(kind="page", url="http://a.test/x", origin="http://a.test", depth=2,
                        status=200, reason="fetched", bytes=10, started_at=1_700_000_000.5,
                        redirect_chain=["http://a.test/"], conditional=True, body_key="k")  # fmt: skip
    doc = Document(fetch_id=fetch.fetch_id, url=fetch.url, origin=fetch.origin, title="T",
                   text_hash="h", text_chars=4, links_out=3, fetched_at=fetch.started_at)  # fmt: skip
    for record, table in ((fetch, "fetches"), (doc, "documents")):
        row = json.loads(record.to_json())
        columns = {c: t for c, t in SCHEMAS[table].items() if c not in WRITE_COLUMNS}
        frame = pl.DataFrame([{c: row[c] for c in columns}],
                             schema={c: (pl.Float64 if t == pl.Datetime("us", "UTC") else t)
                                     for c, t in columns.items()})  # fmt: skip
        assert frame.height == 1
        assert frame.row(0, named=True) == {c: row[c] for c in columns}


def test_each_record_gets_its_own_id() -> None:
    assert FetchRecord().fetch_id != FetchRecord().fetch_id
    assert len({FetchRecord().fetch_id for _ in range(10_000)}) == 10_000


def test_record_ids_are_uuid7_and_later_ones_sort_later() -> None:
    """Time-ordered ids keep the store's fetch_records index appending (records._new_id)."""
    import time
    import uuid

    first = FetchRecord().fetch_id
    time.sleep(0.003)
    later = [FetchRecord().fetch_id for _ in range(50)]
    assert all(len(x) == 32 and int(x, 16) >= 0 for x in [first, *later])
    parsed = uuid.UUID(first)
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
    assert abs(int(first[:12], 16) - time.time() * 1000) < 60_000  # milliseconds of Unix time
    assert all(first < x for x in later)


def test_the_stored_json_reads_back_as_the_record_and_as_json_dumps_wrote_it() -> None:
    """What the store keeps (orjson) is the record field for field, and the same values the
    json.dumps(default=str) of stores written earlier gives: text as itself (UTF-8, no
    escapes), floats to the last digit, lists as lists, anything else as its str()."""
    import datetime
    from dataclasses import asdict

    from atlas_pipeline.records import to_json

    fetch = FetchRecord(url="http://ü.test/東京?q=naïve", origin="http://xn--tda.test:80",
                        started_at=1_700_000_000.123456, elapsed_s=0.1 + 0.2,
                        redirect_chain=["http://a.test/", "http://b.test/\u2028"],
                        error="timeout — 30 s")  # fmt: skip
    text = fetch.to_json()
    assert json.loads(text) == asdict(fetch)
    assert json.loads(text) == json.loads(json.dumps(asdict(fetch), default=str))
    assert "東京" in text and "\\u" not in text
    when = datetime.datetime(2026, 12, 4, 15, 0, 1, tzinfo=datetime.UTC)
    rows = [{"href": "/a", "anchor": "Grüße", "depth": 3, "seen": when, "day": when.date(),
             "record": FetchRecord(fetch_id="f"), "nofollow": False}]  # fmt: skip
    assert json.loads(to_json(rows)) == json.loads(json.dumps(rows, default=str))
