"""What an answer means for its URL: a pure rule from (lease, response, now, policy) to a verdict.

The fetch batch calls `classify` on every response and acts on the verdict: a settled URL is
committed as it stands (blocked, quarantined, retried, given up, gone); the other verdicts say
which step comes next (a content check for a 304, the redirect's target, the sitemap's
entries, or the parser). No database, no clock, no network: tests/engine/test_classify.py holds
the table of answers and the decision each one gets.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from enum import StrEnum

from .coordination.base import Lease, UrlState
from .fetcher import HTML_TYPES, Response
from .politeness import backoff_s, parse_retry_after
from .reasons import Reason

REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Over one of these bounds a response is kept away from the parser, with the reason.
BOUNDS = frozenset(
    {Reason.TOO_LARGE, Reason.HEADERS_TOO_LARGE, Reason.BODY_TIMEOUT, Reason.BINARY_CONTENT,
     Reason.BAD_ENCODING}
)  # fmt: skip
BACKOFF_CAP_S = 3600.0  # the longest a retry of one URL is put off by our own backoff
MAX_RETRY_AFTER_S = 24 * 3600.0  # a Retry-After beyond this is taken as this


class Next(StrEnum):
    """What the batch does with a response after its verdict."""

    SETTLED = "settled"  # commit the verdict's state, reason and due time as they are
    NOT_MODIFIED = "not_modified"  # a content check: the stored document stands
    REDIRECT = "redirect"  # judge the Location like a link
    SITEMAP = "sitemap"  # read the entries
    PARSE = "parse"  # store the body and extract it


@dataclass(frozen=True, slots=True)
class ClassifyPolicy:
    """The knobs the rule reads (from `limits` and `revisit_interval_s` of the crawl config)."""

    max_attempts: int
    retry_backoff_s: float
    revisit_interval_s: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """A response's decision. For SETTLED: the URL's new `state`, the `reason` its fetch record
    keeps and when it is `due` again; `gave_up` means the URL ran out of attempts (its state
    reason is then max_attempts, the record keeps the failure). `origin_until` is set when
    the answer backs off the whole origin (Retry-After, or a 429 without one)."""

    next: Next
    reason: Reason
    state: UrlState = UrlState.FETCHED
    due: float = 0.0
    gave_up: bool = False
    origin_until: float | None = None

    @property
    def state_reason(self) -> Reason:
        """The reason the URL's row keeps."""
        return Reason.MAX_ATTEMPTS if self.gave_up else self.reason


def classify(
    lease: Lease, resp: Response, now: float, policy: ClassifyPolicy, rng: random.Random
) -> Verdict:
    """The decision for one response. `rng` draws the jitter of retry backoffs."""
    revisit = now + policy.revisit_interval_s
    status = resp.status
    if resp.error == Reason.EGRESS_REFUSED:
        return Verdict(Next.SETTLED, Reason.EGRESS_REFUSED, UrlState.BLOCKED, revisit)
    if resp.error is not None and resp.error in BOUNDS:
        return Verdict(Next.SETTLED, Reason(resp.error), UrlState.QUARANTINED, revisit)
    if resp.error is not None or status is None:
        return _retry(lease, Reason(resp.error or Reason.NETWORK_ERROR), now, policy, rng)
    if status in (429, 503):
        # The server's Retry-After holds for the whole origin, exactly; a 429 without one
        # backs the origin off with jitter. A bare 503 may be one page's hiccup: only that
        # URL waits, and adaptive pacing slows the origin if its 5xx answers repeat.
        wait = parse_retry_after(resp.headers.get("retry-after"), now)
        if wait is None and status == 429:
            wait = backoff_s(lease.attempts, policy.retry_backoff_s, BACKOFF_CAP_S, rng)
        until = None if wait is None else now + min(wait, MAX_RETRY_AFTER_S)
        reason = Reason.HTTP_THROTTLED if status == 429 else Reason.HTTP_SERVER_ERROR
        verdict = _retry(lease, reason, now, policy, rng)
        return verdict if until is None else replace(verdict, origin_until=until)
    if status >= 500:
        return _retry(lease, Reason.HTTP_SERVER_ERROR, now, policy, rng)
    if status == 304:
        return Verdict(Next.NOT_MODIFIED, Reason.NOT_MODIFIED)
    if status in REDIRECTS:
        return Verdict(Next.REDIRECT, Reason.REDIRECT, UrlState.FETCHED, revisit)
    if status in (404, 410):
        return Verdict(Next.SETTLED, Reason.HTTP_GONE, UrlState.TERMINAL, revisit)
    if not 200 <= status < 300:
        return Verdict(Next.SETTLED, Reason.HTTP_CLIENT_ERROR, UrlState.TERMINAL, revisit)
    if lease.kind == "sitemap":
        return Verdict(Next.SITEMAP, Reason.FETCHED, UrlState.FETCHED, revisit)
    ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype not in HTML_TYPES:
        return Verdict(Next.SETTLED, Reason.NOT_HTML, UrlState.QUARANTINED, revisit)
    return Verdict(Next.PARSE, Reason.FETCHED, UrlState.FETCHED, revisit)


def _retry(
    lease: Lease, reason: Reason, now: float, policy: ClassifyPolicy, rng: random.Random
) -> Verdict:
    """Due again after a jittered backoff, or given up once the attempts are spent."""
    if lease.attempts >= policy.max_attempts:
        return Verdict(Next.SETTLED, reason, UrlState.TERMINAL, now + policy.revisit_interval_s,
                       gave_up=True)  # fmt: skip
    delay = backoff_s(lease.attempts, policy.retry_backoff_s, BACKOFF_CAP_S, rng)
    return Verdict(Next.SETTLED, reason, UrlState.FAILED_RETRYABLE, now + delay)
