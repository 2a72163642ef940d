"""Reason codes: every decision about a URL carries one, and they end up in Delta tables."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Why a URL was admitted, rejected, blocked, deferred, quarantined or failed."""

    # discovery / scope (links table)
    ADMITTED = "admitted"
    SEED = "seed"
    ALREADY_KNOWN = "already_known"
    BAD_URL = "bad_url"
    SCHEME_NOT_ALLOWED = "scheme_not_allowed"
    USERINFO = "userinfo_refused"  # user:password@ in the URL: never stored nor sent
    HOST_NOT_ALLOWED = "host_not_allowed"
    URL_RULE_DENIED = "url_rule_denied"  # a deny rule of scope.url_rules matched first
    MAX_DEPTH = "max_depth"
    URL_TOO_LONG = "url_too_long"
    NOFOLLOW = "nofollow"
    ORIGIN_BUDGET = "origin_budget_exhausted"  # known, deferred to a later cycle
    # robots
    ROBOTS_DISALLOWED = "robots_disallowed"
    ROBOTS_UNREACHABLE = "robots_unreachable"
    ROBOTS_THROTTLED = "robots_throttled"
    ROBOTS_RECHECK = "robots_recheck"  # blocked before; judged again against the newest rules
    # page directives (directives.py): <meta name="robots">, <meta name="<token>">, X-Robots-Tag
    META_NOFOLLOW = "meta_nofollow"  # links table: its page says nofollow, so not queued
    NOINDEX = "noindex"  # documents / index_ready: stored, never sent to the indexer
    # traps (traps.py): caps on URL spaces that never end
    QUERY_VARIANT_CAP = "query_variant_cap"  # facets, search terms: too many query strings
    PATTERN_CAP = "path_pattern_cap"  # too many URLs differing only in their digits
    CALENDAR_CAP = "calendar_cap"  # ... and those digits are dates
    PATH_VARIANT_CAP = "path_variant_cap"  # too many query strings of one path, any keys
    TRAP_NO_NOVELTY = "trap_no_novelty"  # the path's last variants fetched brought nothing new
    PAGINATION_CAP = "pagination_cap"  # a page number past limits
    REPEATING_PATH = "repeating_path"  # /a/a/a/: a relative link feeding on itself
    # egress
    EGRESS_REFUSED = "egress_refused"
    # fetch outcomes
    FETCHED = "fetched"
    NOT_MODIFIED = "not_modified"
    CONTENT_UNCHANGED = "content_unchanged"  # a 200 whose content hash matched the last one
    REDIRECT = "redirect"
    HTTP_CLIENT_ERROR = "http_4xx"
    HTTP_GONE = "http_gone"  # 404 / 410: final
    HTTP_SERVER_ERROR = "http_5xx"
    HTTP_THROTTLED = "http_429"
    TIMEOUT = "timeout"
    NETWORK_ERROR = "network_error"
    TOO_LARGE = "body_too_large"
    HEADERS_TOO_LARGE = "headers_too_large"
    BAD_ENCODING = "bad_content_encoding"  # an encoding we did not ask for, or a corrupt one
    BODY_TIMEOUT = "body_timeout"  # headers came, the body did not within the total timeout
    NOT_HTML = "content_type_not_allowed"
    BINARY_CONTENT = "binary_content"  # labelled text/html, but its first bytes are binary
    PARSE_FAILED = "parse_failed"
    SITEMAP_UNREADABLE = "sitemap_unreadable"  # not a sitemap: bad XML, corrupt gzip, too big
    PARSE_TIMEOUT = "parse_timeout"  # over the parser's CPU-time limit
    PARSE_MEMORY = "parse_memory"  # over the parser's memory limit
    PARSE_CRASHED = "parse_crashed"  # the parser process died
    REDIRECT_LIMIT = "redirect_limit"  # more than limits.max_redirects hops
    REDIRECT_LOOP = "redirect_loop"  # the chain came back to a URL it had visited
    MAX_ATTEMPTS = "max_attempts"
    # scheduling
    DEFERRED_BACKOFF = "deferred_origin_backoff"
    CYCLE_DEADLINE = "cycle_deadline"  # limits.batch_max_s ended the batch: the next cycle
    INTERRUPTED = "interrupted"  # the crawl was stopped (Ctrl-C) while the URL was in flight
    OPERATOR_PAUSED = "operator_paused"  # its origin or registrable domain is paused
    OWNERSHIP_LOST = "ownership_lost"  # regions: the lease it was claimed under ended first
    SUPPRESSED = "suppressed"  # an opt-out covers it: never fetched, never stored
    LEASE_EXPIRED = "lease_expired"
    STALE_ATTEMPT = "stale_attempt"
    # frontier selection
    REVISIT_DUE = "revisit_due"
    CARRIED_OVER = "carried_over"
    # render lane (documents.render_reason)
    RENDER_NEEDED = "render_needed"  # the page class needs the browser: text from the DOM
    RENDER_NOT_NEEDED = "render_not_needed"  # the raw HTML holds the text (measured)
    RENDER_FALLBACK = "render_fallback"  # it needed rendering but did not fit the lane
    RENDER_UNAVAILABLE = "render_unavailable"  # no browser: the raw HTML's text


# Reasons of fetch records for URLs given back at the send gate: no request left, so the
# origin saw none (audits and reports leave them out).
UNSENT = frozenset({Reason.DEFERRED_BACKOFF.value, Reason.OWNERSHIP_LOST.value})


# What `atlas inspect` prints beside a code: why the crawl decided so, in one line. Codes
# without an entry are named only; a new code that a user can meet should get one.
EXPLANATIONS: dict[str, str] = {
    Reason.URL_RULE_DENIED: "a deny rule of scope.url_rules matched it before any allow rule "
    "(atlas inspect names the rule)",
    Reason.USERINFO: "the link names a user or password (user:password@host): refused so the "
    "credentials are never stored or sent; the stored href shows them as ***",
    Reason.META_NOFOLLOW: "the linking page's robots meta tag or X-Robots-Tag header says "
    "nofollow, so its links are recorded but not queued",
    Reason.NOINDEX: "the page's robots meta tag or X-Robots-Tag header says noindex: the "
    "document is stored but not indexed, and an earlier indexed copy is deleted",
    Reason.PATH_VARIANT_CAP: "the path already has scope.max_path_variants worded query "
    "strings, whatever their keys (filters combined in any order)",
    Reason.DEFERRED_BACKOFF: "its origin was backing off (a Retry-After, or errors) longer "
    "than the batch could wait, so the URL was left for a later batch, untried",
    Reason.OWNERSHIP_LOST: "regions: the region's ownership lease on the origin ended (or "
    "another region took it over) between the claim and the request leaving, so the request "
    "was not sent and the URL went back to the queue, untried",
    Reason.CYCLE_DEADLINE: "the fetch batch reached limits.batch_max_s before this URL's "
    "turn, so it waits for the next cycle, untried",
    Reason.INTERRUPTED: "the crawl was stopped (Ctrl-C) while this URL was in flight or "
    "waiting to be parsed; it went back to the queue, due at once, for the partition's re-run",
    Reason.TRAP_NO_NOVELTY: "the last scope.novelty_window fetched query variants of this "
    "path found no new URL and no new text, so its variants are no longer admitted",
    Reason.RENDER_NEEDED: "its origin's page class gives too little text without a browser "
    "(measured on sample pages): its text comes from the page rendered in headless Chromium",
    Reason.RENDER_NOT_NEEDED: "its raw HTML holds the text (measured), so it was not rendered",
    Reason.RENDER_FALLBACK: "its page class needs rendering but the page did not fit the render "
    "lane (busy, out of render seconds, over a cap): the raw HTML's text was kept",
    Reason.RENDER_UNAVAILABLE: "its page class would be measured or rendered, but no browser "
    "is installed (apt-get install -y chromium): the raw HTML's text was kept",
}


def explain(code: str) -> str | None:
    """The one-line explanation of a reason code, None when it has none."""
    return EXPLANATIONS.get(code)
