"""What every lake table and column means, for an analyst: units, what null means, which
reason codes a column holds. `lake_schema.SCHEMAS` holds the types; this holds the words, and
a test fails when the two name different columns. The Dagster asset pages, the README's
column reference and the dbt sources are all made from it (`lake_reference`).

Timestamps are UTC; a `_s` column is in seconds. Reason codes are those `atlas inspect`
explains.
"""

from __future__ import annotations

from .lake_schema import SCHEMAS

_CYCLE = "The crawl cycle partition the row was written for (c0001, c0002, ...)."
_SHARD = "The origin shard partition (shard_000, ...): every URL of an origin is in one shard."
_CATALOGUE_CYCLE = "The crawl cycle after which this shard's rows were last exported."
_FENCE = (
    "The batch fence token the partition was written under: a later run of the same "
    "partition writes with a higher one and replaces these rows."
)
_PRIORITY = (
    "Crawl priority from 0 to 1, higher first: falls with link depth; seeds, sitemaps, a "
    "partner feed's rating and operator settings raise or set it."
)
_URL_STATE = (
    "Where the URL stands: discovered, eligible (queued), leased (being fetched), fetched, "
    "failed_retryable, terminal (gone for good), blocked (robots or egress said no) or "
    "quarantined (broke a bound, e.g. a parser limit)."
)
_DEPTH = "Link depth: 0 for a seed, one more for every link followed from it."
_FETCH_ID = "Id of the fetch (a `fetches` row) this row comes from."
_EXTRACTION = "Version of the text extractor that produced the document."

TABLE_DESCRIPTIONS: dict[str, str] = {
    "urls": "The URL catalogue: one row per canonical URL with where it stands (state, "
    "reason), its last answer and validators, its revisit plan and where it was found, as it "
    "stands after the latest cycle. Partitioned by origin_shard only.",
    "origins": "Every origin (scheme://host:port) as it stands after the latest cycle: its "
    "pacing (configured and adaptive gap, concurrency cap, backoff), politeness bucket and "
    "fairness class, robots.txt status, validator trust and operator pause. Partitioned by "
    "origin_shard only.",
    "render_classes": "The render lane's decision for each origin and page class, as it "
    "stands after the latest cycle: sampling (its pages are rendered to measure), render "
    "(the raw HTML recovers too little of the rendered text) or plain (never rendered), with "
    "the word counts it was decided on. Partitioned by origin_shard only.",
    "ownership": "Regions: every answer the control plane gave about this shard's origins "
    "while the cycle's batch ran (grants, renewals, take-overs, refusals, stale tokens turned "
    "away, releases), whichever region asked, with the tokens. Empty for a single region.",
    "recrawl_schedule": "Every URL of the shard that was ever checked: when it is due again "
    "and why, its estimated change rate, and how stale it is against its freshness class's "
    "target.",
    "frontier": "The URLs queued for this cycle and shard when it was planned: seeds, new "
    "links, carried-over retries, due revisits and robots re-checks, at most "
    "scope.max_pages_per_origin per origin.",
    "fetches": "One row per request (pages, sitemaps and robots.txt) and per URL given back "
    "unsent: status, bytes, timings, validators, body key, the reason code of what it "
    "established, its lease and fence.",
    "documents": "One row per page fetch that yielded a new document: title, author, date, "
    "language, the id of its text (text_hash), its canonical hint, extraction version and "
    "provenance. The text itself is in document_texts.",
    "document_texts": "Extracted text, stored once per document id (the text hash) however "
    "many URLs hold it: join documents.text_hash = document_texts.document_id. Not "
    "partitioned; a text removed from every document is deleted.",
    "links": "Every distinct link target of every fetched page, redirect and sitemap, with "
    "the decision taken on it (reason) and where it came from.",
    "index_ready": "The indexer outbox: one upsert event per indexable document, a delete "
    "event when a page that was delivered turns noindex. Event ids are deterministic, so a "
    "re-delivered event is a duplicate the indexer can drop.",
    "dedupe_clusters": "Each document of the partition with its content id (same text, same "
    "id) and near-duplicate cluster label, with the threshold and method that decided it. "
    "Labels only: every document is kept.",
}

COLUMN_DESCRIPTIONS: dict[str, dict[str, str]] = {
    "urls": {
        "crawl_cycle": _CATALOGUE_CYCLE,
        "origin_shard": _SHARD,
        "url": "The canonical (normalized) URL.",
        "discovered_url": "The URL as first found (href, seed or sitemap entry), before "
        "normalization.",
        "origin": "scheme://host:port of the URL.",
        "depth": _DEPTH,
        "priority": _PRIORITY,
        "state": _URL_STATE,
        "reason": "Reason code of the URL's latest decision: admission (admitted, seed, "
        "origin_budget_exhausted), frontier selection (revisit_due, carried_over, "
        "robots_recheck), robots (robots_disallowed), or the outcome of its latest fetch "
        "(fetched, http_gone, timeout, max_attempts, ...).",
        "queued_cycle": "The cycle the URL was last queued in; null: never queued.",
        "due_at": "When the URL may be fetched next: a revisit or retry time. "
        "1970-01-01 (epoch 0): due at once.",
        "attempts": "Fetch attempts in the cycle it is queued in (reset when a revisit is queued).",
        "fence": "Fence token of the URL's latest lease; 0: never leased.",
        "robots_version": "Version of its origin's robots.txt rules that last judged the URL; "
        "null: not judged yet.",
        "source": "Where the URL was found: the URL of the page, sitemap or redirect that "
        "named it, the robots.txt URL for a sitemap it announced, or seed, feed (partner "
        "feed) or config (a configured sitemap).",
        "discovered_cycle": "The cycle in which the URL entered the catalogue; null: found "
        "outside a cycle.",
        "discovered_at": "When the URL entered the catalogue.",
        "last_fetch_at": "When its latest fetch result was committed; null: never fetched.",
        "last_status": "HTTP status of its latest fetch; null: never fetched, or no answer "
        "(timeout, network error, given back unsent).",
        "etag": "The latest ETag the URL answered with (kept when a later answer had none); "
        "sent back as If-None-Match.",
        "last_modified": "The latest Last-Modified header (as sent), sent back as "
        "If-Modified-Since.",
        "content_hash": "sha256 of the latest stored body (its key in the body store); null: "
        "no body stored.",
        "document_id": "The document the URL holds: its text hash, or noindex: followed by the text hash "
        "while the page says noindex; null: no document yet.",
        "last_checked_at": "When its content was last checked (a 200 compared with the last "
        "copy, or a 304); null: never.",
        "checks": "Content checks so far.",
        "changes": "Checks that found the content changed.",
        "revisit_interval_s": "Seconds between its latest check and the next one planned; "
        "null: no check yet.",
        "revisit_reason": "Why that interval: first_visit, adaptive (from the estimated change "
        "rate), growth_limited, clamped_min or clamped_max; null: no check yet.",
        "change_rate": "Estimated content changes per second (maximum likelihood over its "
        "checks); null before its second check.",
    },
    "ownership": {
        "crawl_cycle": _CYCLE,
        "origin_shard": _SHARD,
        "seq": "The control plane's audit sequence number (the order it decided in).",
        "answered_at": "When the control plane answered.",
        "origin": "What the lease is on: the origin (scheme://host:port), or with "
        "politeness.bucket domain or ip the registrable domain or address of its bucket.",
        "region": "The region that asked (or released).",
        "action": "grant, renew, takeover (a silent owner's lease ended early), refuse, "
        "reject_stale (the ask carried a token older than the current one) or release.",
        "asked_token": "The token the asking region held; 0: none.",
        "token": "The lease's token after the answer (granted, or the current one when "
        "refused or rejected). Each new holder's is higher than every earlier one.",
        "lease_until": "When the holder's lease ends after the answer.",
        "holder": "The region holding the origin after the answer; null: nobody.",
        "detail": "Why, in words (held by eu, eu silent for 16.2 s, token 41 is older than "
        "42, ...).",
        "reported_by": "The region whose lake this row was written to.",
    },
    "render_classes": {
        "crawl_cycle": _CATALOGUE_CYCLE,
        "origin_shard": _SHARD,
        "origin": "scheme://host:port of the pages.",
        "page_class": "The page class: the first render.page_classes glob the path matches, "
        "else the path's first segment as /segment/* (/ for top-level pages).",
        "state": "sampling: its pages are rendered to measure (render.sample_pages of them); "
        "render: the browser is used for it; plain: its raw HTML holds the text, never "
        "rendered.",
        "samples": "Pages measured both ways (raw HTML and rendered DOM) in this round.",
        "raw_words": "Words extracted from those pages' raw HTML, summed.",
        "rendered_words": "Words extracted from their rendered DOM, summed.",
        "share": "raw_words / rendered_words (render.min_share is the threshold); null: "
        "nothing rendered to compare with.",
        "decided_at": "When sampling ended with this decision; null while sampling. It is "
        "measured afresh render.resample_after_s later.",
        "updated_at": "When the row last changed.",
    },
    "origins": {
        "crawl_cycle": _CATALOGUE_CYCLE,
        "origin_shard": _SHARD,
        "origin": "scheme://host:port.",
        "registrable_domain": "The origin host's registrable domain (public suffix + 1).",
        "fair_class": "Fairness class the origin shares request quota with: its name in "
        "politeness.classes, else its registrable domain.",
        "bucket": "Politeness bucket whose clock and concurrency cap the origin shares: the "
        "origin, its registrable domain or ip: followed by its address (politeness.bucket).",
        "min_gap_s": "Seconds the origin is held to between request starts: "
        "politeness.min_gap_s, widened by its robots.txt Crawl-delay (capped) and by an "
        "operator's floor.",
        "adapt_gap_s": "Seconds adaptive pacing (politeness.adaptive_max_gap_s) adds to that "
        "gap while the origin shows overload (5xx, 429, timeouts, refused connections); 0: "
        "none.",
        "max_in_flight": "Most requests to the origin (or its bucket) at once.",
        "backoff_until": "No request before this time: set by an answer asking Atlas to back "
        "off (a 429, a Retry-After) or by an unreachable or throttled robots.txt; 1970-01-01 "
        "(epoch 0): never backed off.",
        "robots_status": "What its latest robots.txt fetch established: parsed (rules apply), "
        "unavailable (4xx: allow all), unreachable (5xx, timeout: fetch nothing) or throttled "
        "(429); null: not fetched yet.",
        "robots_version": "Version of its robots.txt rules: one more each time the status or "
        "text changes; 0: never fetched.",
        "robots_fetched_at": "When robots.txt was last fetched; null: never.",
        "validators_trusted": "Whether conditional requests (ETag, Last-Modified) are sent: "
        "false once its validators proved misleading (recrawl.untrusted_after), then the "
        "content hash alone decides.",
        "validator_checks": "Conditional requests the origin answered.",
        "validator_misses": "Of those, the 200s for content that had not changed.",
        "paused": "Whether an operator pause (of the origin or its domain) holds.",
    },
    "recrawl_schedule": {
        "crawl_cycle": _CYCLE,
        "origin_shard": _SHARD,
        "url": "The canonical URL.",
        "origin": "scheme://host:port of the URL.",
        "priority": _PRIORITY,
        "freshness_class": "The freshness class its priority falls in (freshness.classes).",
        "state": _URL_STATE,
        "last_checked_at": "When its content was last checked (a 200 compared, or a 304).",
        "next_due_at": "When it is due for its next fetch.",
        "interval_s": "Seconds from its latest check to the next one planned; null: no "
        "revisit planned yet.",
        "reason": "Why then: first_visit, adaptive, growth_limited, clamped_min, clamped_max, "
        "or the state and reason code (state:reason) when a retry or a dead end decides (e.g. "
        "failed_retryable:timeout, terminal:http_gone).",
        "changes_per_day": "Estimated content changes per day; null before its second check.",
        "checks": "Content checks so far.",
        "changes": "Checks that found the content changed.",
        "validators_trusted": "Whether its origin's validators are trusted (conditional "
        "requests sent).",
        "staleness_s": "Seconds since its last check, when the table was written.",
        "target_s": "Its freshness class's target: seconds within which it should be "
        "checked again.",
        "stale": "Whether staleness_s exceeds target_s.",
    },
    "frontier": {
        "crawl_cycle": _CYCLE,
        "origin_shard": _SHARD,
        "url": "The canonical URL queued.",
        "origin": "scheme://host:port of the URL.",
        "depth": _DEPTH,
        "priority": _PRIORITY,
        "state": "The URL's state when the cycle was planned (eligible: queued; a later "
        "state if it was already fetched in this cycle).",
        "reason": "Why it is queued: admitted (new), seed, revisit_due, carried_over (a "
        "retry), robots_recheck (blocked before; judged again against newer rules).",
        "due_at": "When it may be fetched; 1970-01-01 (epoch 0): at once.",
        "attempts": "Fetch attempts in this cycle so far.",
        "selected_at": "When the frontier was planned.",
    },
    "fetches": {
        "crawl_cycle": _CYCLE,
        "origin_shard": _SHARD,
        "fetch_id": "Unique id of the fetch.",
        "kind": "page, sitemap, robots (a robots.txt request) or subresource (a request a "
        "rendered page made: a script, XHR or style, answered by Atlas for the browser).",
        "url": "The URL requested.",
        "origin": "scheme://host:port of the URL.",
        "depth": "Link depth of the URL (0 for robots.txt).",
        "status": "HTTP status; null: no answer (timeout, network error, egress refused, or "
        "given back unsent).",
        "reason": "Reason code of what the request established: fetched, not_modified, "
        "content_unchanged, redirect, http_4xx, http_gone, http_5xx, http_429, timeout, "
        "network_error, body_too_large, content_type_not_allowed, parse_failed, ...; "
        "deferred_origin_backoff, ownership_lost or interrupted for a URL given back unsent; for "
        "robots.txt "
        "its status (parsed, unavailable, unreachable, throttled).",
        "content_type": "Content-Type header of the answer; null: none.",
        "bytes": "Bytes of the body read, after decompression; 0: none kept (an error, or "
        "refused for its size or type).",
        "started_at": "When the request was sent.",
        "elapsed_s": "Seconds from sending the request to the end of the body (or of the "
        "failure); 0 for a URL given back unsent.",
        "etag": "ETag header of the answer; null: none.",
        "last_modified": "Last-Modified header of the answer; null: none.",
        "location": "Location header (credentials shown as ***); null: none.",
        "final_url": "Where a redirect pointed, normalized; null: not a redirect, or an "
        "unusable target.",
        "lease_id": "The lease the request was made under.",
        "fence": "Fence token of that lease (0 for robots.txt): a commit with an older one is "
        "refused.",
        "attempt": "Attempt number of the URL in this cycle (1: first).",
        "robots_version": "Version of the origin's robots.txt rules the URL was allowed under; "
        "null for robots.txt itself.",
        "error": "What went wrong, in words (timeout, connection error, size limit, parser "
        "failure); null: nothing.",
        "body_key": "sha256 of the stored body (its key in the body store); null: no body "
        "stored (only HTML pages' bodies are).",
        "original_url": "The first URL of the redirect chain that led here (the URL itself "
        "when none); for a subresource, the rendered page that asked for it; null for "
        "robots.txt.",
        "redirect_chain": "The URLs redirected from on the way here, first first; empty: none.",
        "batch_fence": _FENCE,
        "conditional": "Whether validators were sent (If-None-Match / If-Modified-Since).",
    },
    "documents": {
        "crawl_cycle": _CYCLE,
        "origin_shard": _SHARD,
        "fetch_id": _FETCH_ID,
        "url": "The canonical URL of the page.",
        "origin": "scheme://host:port of the URL.",
        "title": "Title as extracted; null: none found.",
        "author": "Author as extracted; null: none found.",
        "published": "Publication date as extracted (text); null: none found.",
        "description": "The page's meta description; null: none.",
        "language": "Detected language code of the text; null: undetermined.",
        "text_hash": "Id of the extracted text (sha256 of it, whitespace normalized): the same text "
        "has the same id on every URL. Joins document_texts.document_id.",
        "text_chars": "Characters of extracted text; 0: the page yielded none.",
        "canonical_hint": "The page's rel=canonical link as written; null: none. A hint only: "
        "dedupe_clusters says whether the content agrees.",
        "charset": "Character encoding the body was decoded with.",
        "body_key": "sha256 of the raw body (its key in the body store), kept until body "
        "retention expires it.",
        "links_out": "Distinct link targets found on the page (its rows in links, less any "
        "an opt-out removed).",
        "extraction_version": _EXTRACTION,
        "fetched_at": "When the page was requested.",
        "batch_fence": _FENCE,
        "index_reason": "Why the document is kept out of the index (noindex: the page's "
        "robots meta tag or X-Robots-Tag said so); null: indexed.",
        "withdrawn_document_id": "The document an earlier upsert delivered for this URL, "
        "withdrawn by a delete event now that the page says noindex; null: none.",
        "render_reason": "Whether the text came from the page rendered in headless Chromium: "
        "render_needed (it did), render_not_needed (the raw HTML holds it, measured), "
        "render_fallback (it needed rendering but did not fit the lane), render_unavailable "
        "(no browser); null: the render lane is off.",
    },
    "document_texts": {
        "crawl_cycle": "The crawl cycle whose write first stored this text.",
        "origin_shard": "The shard whose write first stored this text.",
        "document_id": "The text's id (sha256 of it, whitespace normalized): documents.text_hash.",
        "text": "The extracted text.",
        "text_chars": "Characters of the text.",
        "extraction_version": _EXTRACTION,
    },
    "links": {
        "crawl_cycle": _CYCLE,
        "origin_shard": _SHARD,
        "fetch_id": "Id of the fetch (page, sitemap or redirect) the link was found in.",
        "source_url": "The URL of that page, sitemap or redirecting URL.",
        "href": "The link as written (a user:password@ shown as ***@).",
        "url": "The canonical target URL; null: it could not be made one (bad_url).",
        "target_origin": "scheme://host:port of the target; null: refused before it became "
        "a candidate (scope, traps, egress).",
        "anchor": "Anchor text; empty for other kinds than link.",
        "nofollow": "Whether the link carries rel=nofollow.",
        "depth": "Link depth the target gets (the source's plus one; a redirect target keeps "
        "the source's).",
        "reason": "The decision on the target: admitted, already_known, a scope refusal "
        "(host_not_allowed, url_rule_denied, max_depth, bad_url, ...), a trap cap "
        "(query_variant_cap, calendar_cap, ...), robots_disallowed, nofollow, meta_nofollow, "
        "redirect_limit or redirect_loop.",
        "kind": "link (an anchor on the page), canonical (the page's rel=canonical), ascend (a parent "
        "path), sitemap (a sitemap entry) or redirect (a Location target).",
        "batch_fence": _FENCE,
        "session_id_stripped": "Whether a session-id parameter was dropped from the href to "
        "make url.",
    },
    "index_ready": {
        "crawl_cycle": _CYCLE,
        "origin_shard": _SHARD,
        "event_id": "Deterministic id of the event (URL, document, extraction version, "
        "action): a re-delivery repeats it.",
        "action": "upsert (index this document for the URL) or delete (withdraw it).",
        "url": "The canonical URL.",
        "document_id": "The document's text hash; for a delete, the document withdrawn.",
        "fetch_id": _FETCH_ID,
        "title": "Title of the document; null for a delete.",
        "language": "Language code of the document; null for a delete or undetermined.",
        "extraction_version": _EXTRACTION,
        "fetched_at": "When the page was requested.",
        "batch_fence": _FENCE,
        "reason": "Why a delete was emitted (noindex); null for an upsert.",
    },
    "dedupe_clusters": {
        "crawl_cycle": _CYCLE,
        "origin_shard": _SHARD,
        "url": "The canonical URL of the document.",
        "fetch_id": _FETCH_ID,
        "document_id": "Its text hash: URLs with the same text share it.",
        "cluster_id": "Near-duplicate cluster label: the smallest text hash among the "
        "cluster's documents (its own text hash when alone).",
        "similarity": "Estimated similarity (MinHash Jaccard of word shingles, 4 decimals) to "
        "the cluster's labelling document; 1.0 for that document or one alone.",
        "threshold": "The similarity threshold for near-duplicate candidates "
        "(dedupe.threshold) when the row was written.",
        "method": "minhash-lsh+volatile-lines, or split when an operator took the URL out of "
        "its cluster (dedupe.split_urls).",
        "canonical_url": "The URL its rel=canonical names, normalized; null: none, unusable, "
        "or the URL itself.",
        "canonical_confirmed": "Whether the canonical page is in the same cluster; null: no "
        "canonical, or its page is not in this partition.",
    },
}


def undescribed() -> list[str]:
    """table.column for every schema column without a description, and every description of
    a column the schema lacks (both must be empty)."""
    out = [f"{t}: no table description" for t in SCHEMAS if not TABLE_DESCRIPTIONS.get(t)]
    out += [f"{t}: not a lake table" for t in set(TABLE_DESCRIPTIONS) - set(SCHEMAS)]
    out += [f"{t}: not a lake table" for t in set(COLUMN_DESCRIPTIONS) - set(SCHEMAS)]
    for table, columns in SCHEMAS.items():
        described = COLUMN_DESCRIPTIONS.get(table, {})
        out += [f"{table}.{c}: no description" for c in columns if not described.get(c)]
        out += [f"{table}.{c}: not a column" for c in described if c not in columns]
    return sorted(out)
