"""The lake's tables: every column and its type, the partitioning, and the columns that
name a URL or an origin (what an opt-out purge matches on). `lake` writes and reads them;
`lake_columns` says what each table and column means (a column added here needs its words
there, or tests/engine/test_lake.py fails)."""

from __future__ import annotations

from typing import Any

import polars as pl

LAYER = "crawl"
TS = pl.Datetime("us", "UTC")
KEYS = {"crawl_cycle": pl.String, "origin_shard": pl.String}

SCHEMAS: dict[str, dict[str, Any]] = {
    "urls": {
        **KEYS, "url": pl.String, "discovered_url": pl.String, "origin": pl.String,
        "depth": pl.Int32, "priority": pl.Float64, "state": pl.String, "reason": pl.String,
        "queued_cycle": pl.String, "due_at": TS, "attempts": pl.Int32, "fence": pl.Int64,
        "robots_version": pl.Int64, "source": pl.String, "discovered_cycle": pl.String,
        "discovered_at": TS, "last_fetch_at": TS, "last_status": pl.Int32, "etag": pl.String,
        "last_modified": pl.String, "content_hash": pl.String, "document_id": pl.String,
        "last_checked_at": TS, "checks": pl.Int64, "changes": pl.Int64,
        "revisit_interval_s": pl.Float64, "revisit_reason": pl.String, "change_rate": pl.Float64,
    },
    "origins": {
        **KEYS, "origin": pl.String, "registrable_domain": pl.String, "fair_class": pl.String,
        "bucket": pl.String, "min_gap_s": pl.Float64, "adapt_gap_s": pl.Float64,
        "max_in_flight": pl.Int32, "backoff_until": TS, "robots_status": pl.String,
        "robots_version": pl.Int64, "robots_fetched_at": TS, "validators_trusted": pl.Boolean,
        "validator_checks": pl.Int64, "validator_misses": pl.Int64, "paused": pl.Boolean,
    },
    "render_classes": {
        **KEYS, "origin": pl.String, "page_class": pl.String, "state": pl.String,
        "samples": pl.Int32, "raw_words": pl.Int64, "rendered_words": pl.Int64,
        "share": pl.Float64, "decided_at": TS, "updated_at": TS,
    },
    "ownership": {
        **KEYS, "seq": pl.Int64, "answered_at": TS, "origin": pl.String, "region": pl.String,
        "action": pl.String, "asked_token": pl.Int64, "token": pl.Int64, "lease_until": TS,
        "holder": pl.String, "detail": pl.String, "reported_by": pl.String,
    },
    "recrawl_schedule": {
        **KEYS, "url": pl.String, "origin": pl.String, "priority": pl.Float64,
        "freshness_class": pl.String, "state": pl.String, "last_checked_at": TS,
        "next_due_at": TS, "interval_s": pl.Float64, "reason": pl.String,
        "changes_per_day": pl.Float64, "checks": pl.Int64, "changes": pl.Int64,
        "validators_trusted": pl.Boolean, "staleness_s": pl.Float64, "target_s": pl.Float64,
        "stale": pl.Boolean,
    },
    "frontier": {
        **KEYS, "url": pl.String, "origin": pl.String, "depth": pl.Int32, "priority": pl.Float64,
        "state": pl.String, "reason": pl.String, "due_at": TS, "attempts": pl.Int32,
        "selected_at": TS,
    },
    "fetches": {
        **KEYS, "fetch_id": pl.String, "kind": pl.String, "url": pl.String, "origin": pl.String,
        "depth": pl.Int32, "status": pl.Int32, "reason": pl.String, "content_type": pl.String,
        "bytes": pl.Int64, "started_at": TS, "elapsed_s": pl.Float64, "etag": pl.String,
        "last_modified": pl.String, "location": pl.String, "final_url": pl.String,
        "lease_id": pl.String, "fence": pl.Int64, "attempt": pl.Int32,
        "robots_version": pl.Int64, "error": pl.String, "body_key": pl.String,
        "original_url": pl.String, "redirect_chain": pl.List(pl.String), "batch_fence": pl.Int64,
        "conditional": pl.Boolean,
    },
    "documents": {
        **KEYS, "fetch_id": pl.String, "url": pl.String, "origin": pl.String, "title": pl.String,
        "author": pl.String, "published": pl.String, "description": pl.String,
        "language": pl.String, "text_hash": pl.String, "text_chars": pl.Int64,
        "canonical_hint": pl.String, "charset": pl.String, "body_key": pl.String,
        "links_out": pl.Int32, "extraction_version": pl.String, "fetched_at": TS,
        "batch_fence": pl.Int64,
        # why the document was kept out of the index (null: indexed), e.g. noindex; and the
        # document id an earlier upsert gave the indexer for the URL, withdrawn by a delete
        "index_reason": pl.String, "withdrawn_document_id": pl.String,
        # whether the text came from the rendered page (render_needed, ...); null: lane off
        "render_reason": pl.String,
    },
    # The extracted text, stored once per document id (the text hash) however many URLs hold
    # it; `documents` rows map each URL fetch to it with their own provenance.
    "document_texts": {
        **KEYS, "document_id": pl.String, "text": pl.String, "text_chars": pl.Int64,
        "extraction_version": pl.String,
    },
    "links": {
        **KEYS, "fetch_id": pl.String, "source_url": pl.String, "href": pl.String,
        "url": pl.String, "target_origin": pl.String, "anchor": pl.String, "nofollow": pl.Boolean,
        "depth": pl.Int32, "reason": pl.String, "kind": pl.String, "batch_fence": pl.Int64,
        "session_id_stripped": pl.Boolean,  # a session-token parameter was dropped from it
    },
    "index_ready": {
        **KEYS, "event_id": pl.String, "action": pl.String, "url": pl.String,
        "document_id": pl.String, "fetch_id": pl.String, "title": pl.String,
        "language": pl.String, "extraction_version": pl.String, "fetched_at": TS,
        "batch_fence": pl.Int64,
        "reason": pl.String,  # why a delete was emitted (noindex); null for an upsert
    },
    "dedupe_clusters": {
        **KEYS, "url": pl.String, "fetch_id": pl.String, "document_id": pl.String,
        "cluster_id": pl.String, "similarity": pl.Float64, "threshold": pl.Float64,
        "method": pl.String, "canonical_url": pl.String, "canonical_confirmed": pl.Boolean,
    },
}  # fmt: skip
# Columns that name a URL or an origin, per table: what an opt-out purge matches on.
URL_COLUMNS: dict[str, tuple[str, ...]] = {
    "urls": ("url", "discovered_url"), "frontier": ("url",),
    "fetches": ("url", "original_url", "final_url"), "documents": ("url",),
    "links": ("url", "source_url"), "index_ready": ("url",), "document_texts": (),
    "dedupe_clusters": ("url", "canonical_url"), "recrawl_schedule": ("url",), "origins": (),
    "render_classes": (), "ownership": (),
}  # fmt: skip
ORIGIN_COLUMNS: dict[str, tuple[str, ...]] = {
    "urls": ("origin",), "frontier": ("origin",), "fetches": ("origin",),
    "documents": ("origin",), "links": ("target_origin",), "index_ready": (),
    "document_texts": (),
    "dedupe_clusters": (), "recrawl_schedule": ("origin",), "origins": ("origin",),
    "render_classes": ("origin",), "ownership": ("origin",),
}  # fmt: skip
PARTITION_BY: dict[str, list[str]] = {
    "urls": ["origin_shard"], "origins": ["origin_shard"], "document_texts": [],
    "render_classes": ["origin_shard"],
}  # fmt: skip
