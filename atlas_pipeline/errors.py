"""The engine's exception tree.

AtlasError
 +-- ConfigError            a crawl config key or value is wrong (message names it and the fix)
 +-- CoordinationError      the coordination store cannot be reached or used
 |    +-- StaleAttempt      a commit presented a fence token that is no longer current
 |    +-- StoreUnavailable  the store is unreachable for now (retry later; nothing applied)
 +-- EgressRefused          a destination address is not allowed (SSRF gate)
 +-- LakeError              a Delta table cannot be read or written
 +-- BatchInterrupted       a fetch batch stopped on Ctrl-C (re-run the partition to finish)
"""

from __future__ import annotations


class AtlasError(Exception):
    """Base of every error the engine raises on purpose."""


class ConfigError(AtlasError):
    """A bad crawl config: one readable line naming the key and the fix."""


class CoordinationError(AtlasError):
    """The coordination store is unreachable or misbehaving."""


class StaleAttempt(CoordinationError):
    """A fenced write lost: a newer lease (fence token) owns the URL now."""

    def __init__(self, url: str, fence: int) -> None:
        super().__init__(f"stale attempt on {url}: fence {fence} is no longer current")
        self.url = url
        self.fence = fence


class StoreUnavailable(CoordinationError):
    """The store could not be reached or the transaction was rolled back (connection lost,
    server down, deadlock, lock timeout): nothing was applied, the call may be retried."""


class EgressRefused(AtlasError):
    """The egress gate refused a destination; `reason` is the reason code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class StoreOutageTooLong(CoordinationError):
    """The store stayed unreachable past `limits.store_outage_s` during a fetch batch: the
    batch stops (its uncommitted URLs come back when their leases expire); retrying the
    step at once would only meet the same outage, so the message is the failure."""


class LakeError(AtlasError):
    """A Delta table could not be read or written."""


class BatchInterrupted(AtlasError):
    """A fetch batch stopped on Ctrl-C: what its requests brought is committed, the URLs it
    still held went back to the queue, and the partition's lake write waits for its re-run."""

    def __init__(self, cycle: str, shard: int, committed: int, given_back: int) -> None:
        super().__init__(
            f"cycle {cycle} shard {shard} was interrupted: {committed} results committed, "
            f"{given_back} URLs in flight given back; re-run this partition to finish it "
            "(nothing is lost)"
        )
        self.cycle, self.shard = cycle, shard
        self.committed, self.given_back = committed, given_back
