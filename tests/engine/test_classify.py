"""classify(): every kind of answer and the decision it gets, as a table (no network, no store)."""

from __future__ import annotations

import random
from email.utils import formatdate
from typing import Any

import pytest

from atlas_pipeline.classify import (
    BACKOFF_CAP_S,
    MAX_RETRY_AFTER_S,
    ClassifyPolicy,
    Next,
    classify,
)
from atlas_pipeline.coordination.base import Lease, UrlState
from atlas_pipeline.fetcher import Response
from atlas_pipeline.reasons import Reason

NOW = 1_000_000.0
POLICY = ClassifyPolicy(max_attempts=3, retry_backoff_s=10.0, revisit_interval_s=86_400.0)
REVISIT = NOW + POLICY.revisit_interval_s
HTML = {"content-type": "text/html; charset=utf-8"}
S, F, B, Q, T = (UrlState.FETCHED, UrlState.FAILED_RETRYABLE, UrlState.BLOCKED,
                 UrlState.QUARANTINED, UrlState.TERMINAL)  # fmt: skip
BACKOFF = "backoff"  # due after a jittered backoff for the lease's attempt

# (case, status, error, headers, lease kind, attempts) ->
#     (next, reason, state, due, gave up, origin backed off until)
CASES: list[tuple[str, int | None, str | None, dict[str, str], str, int, tuple[Any, ...]]] = [
    ("egress refused", None, Reason.EGRESS_REFUSED, {}, "page", 1,
     (Next.SETTLED, Reason.EGRESS_REFUSED, B, REVISIT, False, None)),
    ("too large", 200, Reason.TOO_LARGE, HTML, "page", 1,
     (Next.SETTLED, Reason.TOO_LARGE, Q, REVISIT, False, None)),
    ("headers too large", None, Reason.HEADERS_TOO_LARGE, {}, "page", 1,
     (Next.SETTLED, Reason.HEADERS_TOO_LARGE, Q, REVISIT, False, None)),
    ("body timeout", 200, Reason.BODY_TIMEOUT, HTML, "page", 1,
     (Next.SETTLED, Reason.BODY_TIMEOUT, Q, REVISIT, False, None)),
    ("binary content", 200, Reason.BINARY_CONTENT, HTML, "page", 1,
     (Next.SETTLED, Reason.BINARY_CONTENT, Q, REVISIT, False, None)),
    ("bad encoding", 200, Reason.BAD_ENCODING, HTML, "page", 1,
     (Next.SETTLED, Reason.BAD_ENCODING, Q, REVISIT, False, None)),
    ("network error", None, Reason.NETWORK_ERROR, {}, "page", 1,
     (Next.SETTLED, Reason.NETWORK_ERROR, F, BACKOFF, False, None)),
    (Reason.TIMEOUT, None, "timeout", {}, "page", 2,
     (Next.SETTLED, Reason.TIMEOUT, F, BACKOFF, False, None)),
    ("no status, no error", None, None, {}, "page", 1,
     (Next.SETTLED, Reason.NETWORK_ERROR, F, BACKOFF, False, None)),
    ("network error, attempts spent", None, Reason.NETWORK_ERROR, {}, "page", 3,
     (Next.SETTLED, Reason.NETWORK_ERROR, T, REVISIT, True, None)),
    ("429 with Retry-After seconds", 429, None, {"retry-after": "30"}, "page", 1,
     (Next.SETTLED, Reason.HTTP_THROTTLED, F, BACKOFF, False, NOW + 30)),
    ("429 with Retry-After date", 429, None,
     {"retry-after": formatdate(NOW + 120, usegmt=True)}, "page", 1,
     (Next.SETTLED, Reason.HTTP_THROTTLED, F, BACKOFF, False, NOW + 120)),
    ("429 with Retry-After beyond a day", 429, None, {"retry-after": "999999"}, "page", 1,
     (Next.SETTLED, Reason.HTTP_THROTTLED, F, BACKOFF, False, NOW + MAX_RETRY_AFTER_S)),
    ("429 without Retry-After", 429, None, {}, "page", 2,
     (Next.SETTLED, Reason.HTTP_THROTTLED, F, BACKOFF, False, BACKOFF)),
    ("429 with an unreadable Retry-After", 429, None, {"retry-after": "soon"}, "page", 1,
     (Next.SETTLED, Reason.HTTP_THROTTLED, F, BACKOFF, False, BACKOFF)),
    ("429, attempts spent: the origin still backs off", 429, None, {"retry-after": "5"},
     "page", 3, (Next.SETTLED, Reason.HTTP_THROTTLED, T, REVISIT, True, NOW + 5)),
    ("503 with Retry-After", 503, None, {"retry-after": "7"}, "page", 1,
     (Next.SETTLED, Reason.HTTP_SERVER_ERROR, F, BACKOFF, False, NOW + 7)),
    ("bare 503: only the URL waits", 503, None, {}, "page", 1,
     (Next.SETTLED, Reason.HTTP_SERVER_ERROR, F, BACKOFF, False, None)),
    ("500", 500, None, HTML, "page", 1,
     (Next.SETTLED, Reason.HTTP_SERVER_ERROR, F, BACKOFF, False, None)),
    ("502 with Retry-After: not an origin backoff", 502, None, {"retry-after": "9"}, "page", 1,
     (Next.SETTLED, Reason.HTTP_SERVER_ERROR, F, BACKOFF, False, None)),
    ("500, attempts spent", 500, None, HTML, "page", 4,
     (Next.SETTLED, Reason.HTTP_SERVER_ERROR, T, REVISIT, True, None)),
    ("304", 304, None, {}, "page", 1, (Next.NOT_MODIFIED, Reason.NOT_MODIFIED, S, 0.0, False, None)),
    ("301", 301, None, {"location": "/b"}, "page", 1,
     (Next.REDIRECT, Reason.REDIRECT, S, REVISIT, False, None)),
    ("308 of a sitemap", 308, None, {"location": "/b"}, "sitemap", 1,
     (Next.REDIRECT, Reason.REDIRECT, S, REVISIT, False, None)),
    ("300 is no redirect we follow", 300, None, HTML, "page", 1,
     (Next.SETTLED, Reason.HTTP_CLIENT_ERROR, T, REVISIT, False, None)),
    ("404", 404, None, HTML, "page", 1, (Next.SETTLED, Reason.HTTP_GONE, T, REVISIT, False, None)),
    ("410", 410, None, {}, "page", 1, (Next.SETTLED, Reason.HTTP_GONE, T, REVISIT, False, None)),
    ("403", 403, None, HTML, "page", 1,
     (Next.SETTLED, Reason.HTTP_CLIENT_ERROR, T, REVISIT, False, None)),
    ("451", 451, None, HTML, "page", 1,
     (Next.SETTLED, Reason.HTTP_CLIENT_ERROR, T, REVISIT, False, None)),
    ("1xx never reaches us as final, but is no page", 101, None, {}, "page", 1,
     (Next.SETTLED, Reason.HTTP_CLIENT_ERROR, T, REVISIT, False, None)),
    ("a sitemap (any content type)", 200, None, {"content-type": "application/xml"}, "sitemap",
     1, (Next.SITEMAP, Reason.FETCHED, S, REVISIT, False, None)),
    ("HTML page", 200, None, HTML, "page", 1, (Next.PARSE, Reason.FETCHED, S, REVISIT, False, None)),
    ("XHTML page", 200, None, {"content-type": "application/xhtml+xml"}, "page", 1,
     (Next.PARSE, Reason.FETCHED, S, REVISIT, False, None)),
    ("content type in capitals", 200, None, {"content-type": " TEXT/HTML ;q=1"}, "page", 1,
     (Next.PARSE, Reason.FETCHED, S, REVISIT, False, None)),
    ("204 without a type", 204, None, {}, "page", 1,
     (Next.SETTLED, Reason.NOT_HTML, Q, REVISIT, False, None)),
    ("PDF", 200, None, {"content-type": "application/pdf"}, "page", 1,
     (Next.SETTLED, Reason.NOT_HTML, Q, REVISIT, False, None)),
]  # fmt: skip


def _lease(kind: str, attempts: int) -> Lease:
    return Lease(url="http://a.test/x", origin="http://a.test", shard=0, depth=1, fence=1,
                 lease_id="l1", expires_at=NOW + 30, attempts=attempts, robots_version=1,
                 kind=kind)  # fmt: skip


def _ceiling(attempts: int) -> float:
    return min(BACKOFF_CAP_S, POLICY.retry_backoff_s * 2 ** max(0, attempts - 1))


@pytest.mark.parametrize(("case", "status", "error", "headers", "kind", "attempts", "want"),
                         CASES, ids=[c[0] for c in CASES])  # fmt: skip
def test_each_answer_gets_its_decision(
    case: str,
    status: int | None,
    error: str | None,
    headers: dict[str, str],
    kind: str,
    attempts: int,
    want: tuple[Any, ...],
) -> None:
    resp = Response(url="http://a.test/x", status=status, started_at=NOW, headers=headers,
                    error=error)  # fmt: skip
    got = classify(_lease(kind, attempts), resp, NOW, POLICY, random.Random(7))
    nxt, reason, state, due, gave_up, origin_until = want
    assert (got.next, got.reason, got.gave_up) == (nxt, reason, gave_up)
    assert got.state is state  # for a verdict not yet settled too: what it settles as
    assert got.state_reason is (Reason.MAX_ATTEMPTS if gave_up else reason)
    if due == BACKOFF:
        assert NOW + _ceiling(attempts) / 2 <= got.due <= NOW + _ceiling(attempts)
    else:
        assert got.due == due
    if origin_until == BACKOFF:
        assert got.origin_until is not None
        assert NOW + _ceiling(attempts) / 2 <= got.origin_until <= NOW + _ceiling(attempts)
    else:
        assert got.origin_until == origin_until


def test_the_jitter_comes_from_the_given_generator() -> None:
    resp = Response(url="http://a.test/x", status=429, started_at=NOW)
    one = classify(_lease("page", 2), resp, NOW, POLICY, random.Random(1))
    same = classify(_lease("page", 2), resp, NOW, POLICY, random.Random(1))
    other = classify(_lease("page", 2), resp, NOW, POLICY, random.Random(2))
    assert (one.due, one.origin_until) == (same.due, same.origin_until)
    assert (one.due, one.origin_until) != (other.due, other.origin_until)
