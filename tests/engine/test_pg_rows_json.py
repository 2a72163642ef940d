"""The JSON array PostgreSQL's many-row statements read (json_to_recordset): every value as
it was, infinities included, which JSON itself cannot spell."""

from __future__ import annotations

import json
import math

import psycopg

from atlas_pipeline.coordination.postgres import rows_json

ROWS = [
    {"url": "http://ü.test/東京", "due_at": math.inf, "priority": 0.1 + 0.2, "n": 2**62,
     "etag": None, "ok": True},
    {"url": "http://a.test/", "due_at": -math.inf, "priority": 1e-300, "n": -(2**63),
     "etag": 'W/"x"', "ok": False},
]  # fmt: skip


def test_rows_are_json_with_infinities_as_strings() -> None:
    text = rows_json(ROWS)
    back = json.loads(text)
    assert [r["due_at"] for r in back] == ["inf", "-inf"]
    for row, read in zip(ROWS, back, strict=True):
        assert {k: v for k, v in read.items() if k != "due_at"} == {
            k: v for k, v in row.items() if k != "due_at"
        }
    assert "東京" in text
    assert rows_json([{"a": 1.5}]) == '[{"a":1.5}]'


def test_postgresql_reads_them_back_as_they_were(pg_schema_url: str) -> None:
    with psycopg.connect(pg_schema_url) as conn:
        got = conn.execute(
            """SELECT url, due_at, priority, n, etag, ok FROM json_to_recordset(%s::json)
               AS v(url text, due_at float8, priority float8, n int8, etag text, ok bool)""",
            (rows_json(ROWS),),
        ).fetchall()
    assert got == [tuple(r.values()) for r in ROWS]
