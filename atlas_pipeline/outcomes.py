"""From a classified response to the Outcome a fetch batch commits.

`classify` decides what an answer means; this builds what gets committed for it: the fetch
record, a redirect's target and a sitemap's entries judged like links, a page's document
(body stored, extracted in the worker pool, its text once per body), and the content check
that plans the URL's next visit. Body-store calls run off the event loop through the batch's
runner (`_blob`), as the fetch loop's own do.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from . import defaults as d
from . import outbox
from .bodies import Bodies, BodyStore, digest
from .classify import Next, Verdict
from .config import CrawlConfig
from .coordination import Lease, Outcome, UrlState
from .coordination.overrides import override_for
from .directives import HEADER, header_directives, header_values, meta_directives, meta_names
from .extractor_pool import ExtractorPool, ParserFailure
from .fetcher import Response
from .kept_parse import Keep, keep_root, text_chars
from .reasons import Reason
from .records import Document, FetchRecord
from .recrawl import (
    FreshnessClass,
    RevisitPolicy,
    dump_history,
    freshness_class,
    load_history,
    next_revisit,
)
from .robots import RobotsPolicy
from .scope import ScopeGuard
from .sitemaps import SitemapError, parse_sitemap
from .urls import BadUrl, normalize, redact_userinfo

if TYPE_CHECKING:
    from .batch import BatchStats
    from .render_step import RenderChoice, RenderStep

T = TypeVar("T")


class OffLoop(Protocol):
    """The batch's runner for body-store calls: runs `call(*args)` off the event loop."""

    def __call__(self, call: Callable[..., T], *args: Any) -> Awaitable[T]: ...


class Outcomes:
    """Builds one batch's outcomes. `policies` is the batch's robots policy per origin (read
    here for links), `overrides` the operator's revisit bounds (set by the batch each run)."""

    def __init__(
        self,
        cfg: CrawlConfig,
        guard: ScopeGuard,
        bodies: Bodies,
        pool: ExtractorPool,
        stats: BatchStats,
        rng: random.Random,
        policies: dict[str, RobotsPolicy],
        blob: OffLoop,
        clock: Callable[[], float],
    ) -> None:
        self.cfg, self.guard, self.bodies, self.pool = cfg, guard, bodies, pool
        self.stats, self.rng, self.clock = stats, rng, clock
        self._policies = policies
        self._blob = blob
        self._keep_root = keep_root(bodies)
        r = cfg.recrawl
        self.revisits = RevisitPolicy(cfg.revisit_interval_s, r.min_interval_s, r.max_interval_s,
                                      r.jitter, r.max_growth, r.history)  # fmt: skip
        self._classes = {name: FreshnessClass(name, t.min_priority, t.target_s)
                         for name, t in cfg.freshness.classes.items()}  # fmt: skip
        self.overrides: list[dict[str, Any]] = []
        self._revisit_by_origin: dict[str, RevisitPolicy] = {}
        self._pending_text: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.render: RenderStep | None = None  # the batch's render lane, when it has one

    async def settle(self, lease: Lease, resp: Response, verdict: Verdict, now: float) -> Outcome:
        """The Outcome to commit for a classified response."""
        reason = verdict.reason.value
        if verdict.next is Next.NOT_MODIFIED:  # the stored document stands; it cost a request
            return self._checked(lease, resp, now, changed=False, reason=reason,
                                 record=self.record(lease, resp, reason))  # fmt: skip
        if verdict.next is Next.REDIRECT:
            return self._redirect(lease, resp, verdict.due)
        if verdict.next is Next.SITEMAP:
            return self._sitemap(lease, resp, verdict.due)
        if verdict.next is Next.PARSE:
            return await self._parsed(lease, resp, verdict.due)
        extra = {"final_reason": Reason.MAX_ATTEMPTS.value} if verdict.gave_up else {}
        return Outcome(verdict.state, verdict.state_reason.value, verdict.due, status=resp.status,
                       record=self.record(lease, resp, reason, **extra))  # fmt: skip

    def record(self, lease: Lease, resp: Response, reason: str, **extra: Any) -> FetchRecord:
        """The fetch record of `resp`; `extra` adds fields or overrides these (a parse
        failure's own error in place of the response's)."""
        fields: dict[str, Any] = dict(
            kind=lease.kind, url=lease.url, origin=lease.origin, depth=lease.depth,
            status=resp.status, reason=reason, content_type=resp.headers.get("content-type"),
            bytes=len(resp.body), started_at=resp.started_at,
            elapsed_s=round(resp.elapsed_s, 6), etag=resp.headers.get("etag"),
            last_modified=resp.headers.get("last-modified"),
            location=redacted(resp.headers.get("location")), lease_id=lease.lease_id,
            fence=lease.fence, attempt=lease.attempts, robots_version=lease.robots_version,
            error=resp.detail,
            original_url=lease.redirect_chain[0] if lease.redirect_chain else lease.url,
            redirect_chain=list(lease.redirect_chain), conditional=conditional(lease),
        )  # fmt: skip
        return FetchRecord(**(fields | extra))

    def _redirect(self, lease: Lease, resp: Response, revisit: float) -> Outcome:
        # A redirect target is a fresh candidate: it gets scope, dedupe, its own origin's
        # robots and bucket and the egress gate, exactly like a link (seed 000 ch. 11), and
        # carries the chain so far, which ends at max_redirects hops or on a repeated URL.
        location = resp.headers.get("location", "")
        judged = self.guard.judge(location, lease.url, lease.depth, lease.url, False,
                                  self._policies.get(lease.origin))  # fmt: skip
        chain = (*lease.redirect_chain, lease.url)
        candidate, reason = judged.candidate, judged.reason
        if judged.url is not None and judged.url in chain:
            candidate, reason = None, Reason.REDIRECT_LOOP.value
        elif len(chain) > self.cfg.limits.max_redirects:
            candidate, reason = None, Reason.REDIRECT_LIMIT.value
        elif candidate is not None:
            candidate = replace(candidate, via=chain)
        row = {"href": judged.stored_href(location), "url": judged.url,
               "target_origin": candidate.origin if candidate else None,
               "anchor": "", "nofollow": False, "depth": lease.depth, "reason": reason,
               "kind": "redirect", "session_id_stripped": judged.session_id_stripped}  # fmt: skip
        record = self.record(lease, resp, Reason.REDIRECT.value, final_url=judged.url)
        return Outcome(UrlState.FETCHED, Reason.REDIRECT.value, revisit, status=resp.status,
                       record=record, links=[(row, candidate)])  # fmt: skip

    def _sitemap(self, lease: Lease, resp: Response, revisit: float) -> Outcome:
        """A sitemap's entries become candidates like links (scope, traps, robots at claim
        time), its <priority> and <lastmod> feeding theirs; an index's entries are sitemaps."""
        try:
            sitemap = parse_sitemap(resp.body, self.cfg.discovery.sitemap_max_bytes)
        except SitemapError as exc:
            record = self.record(lease, resp, Reason.SITEMAP_UNREADABLE.value, error=str(exc))
            return Outcome(UrlState.QUARANTINED, Reason.SITEMAP_UNREADABLE.value, revisit,
                           status=resp.status, record=record)  # fmt: skip
        links = self.guard.sitemap_entries(sitemap, lease.url, lease.depth, self.clock())
        record = self.record(lease, resp, Reason.FETCHED.value, entries=len(sitemap.entries))
        return Outcome(UrlState.FETCHED, Reason.FETCHED.value, revisit, status=resp.status,
                       record=record, links=links)  # fmt: skip

    def _keep(self, key: str) -> Keep | None:
        """What a worker needs to store this body and its text itself: a folder store only
        (the batch does it for an object store)."""
        if self._keep_root is None:
            return None
        return Keep(self._keep_root, key, d.EXTRACTION_VERSION, words=self.render is not None)

    async def _put_local(self, key: str, body: bytes) -> None:
        """A folder store's body, where no worker stored it (an object store's was put
        before anything else)."""
        if isinstance(self.bodies, BodyStore):
            await self._blob(self.bodies.put_known, key, body)

    async def _extract(self, key: str, lease: Lease, resp: Response) -> dict[str, Any]:
        """Links for this URL always; text only if these bytes were never extracted before.
        With a folder store the worker stores the body and the text, and its answer carries
        the text's length in place of the text."""
        keep = self._keep(key)
        cached = None
        if keep is None:
            cached = await self._blob(self.bodies.get_extraction, key, d.EXTRACTION_VERSION)
        pending = self._pending_text.get(key)
        mine: asyncio.Future[dict[str, Any]] | None = None
        if cached is None and pending is None:
            mine = asyncio.get_running_loop().create_future()
            self._pending_text[key] = mine
        try:
            fut = self.pool.submit(resp.body, lease.url, resp.charset, mine is not None,
                                   meta_names(self.cfg.robots_token), keep)  # fmt: skip
            parsed = await asyncio.wrap_future(fut)
            if mine is not None:
                if keep is None:
                    await self._blob(self.bodies.put_extraction, key, d.EXTRACTION_VERSION,
                                     parsed["extraction"])  # fmt: skip
                mine.set_result(parsed["extraction"])
                if parsed.get("reused"):
                    self.stats.extraction_reused += 1
                else:
                    self.stats.extracted += 1
            else:
                if cached is None:
                    assert pending is not None  # one of the two exists when `mine` is None
                    cached = await asyncio.shield(pending)
                parsed["extraction"] = cached
                self.stats.extraction_reused += 1
            return parsed
        except BaseException as exc:
            if mine is not None and not mine.done():
                mine.set_exception(exc)
                mine.exception()  # retrieved here; waiters re-raise it themselves
            raise
        finally:
            if mine is not None:
                self._pending_text.pop(key, None)

    async def _parsed(self, lease: Lease, resp: Response, revisit: float) -> Outcome:
        # a folder store's worker stores the body (below); hashing is ~0.5 ms a MiB
        key = digest(resp.body) if isinstance(self.bodies, BodyStore) else None
        if key is None:
            key = await self._blob(self.bodies.put, resp.body)
        now = self.clock()
        token = self.cfg.robots_token
        said = header_directives(header_values(resp.headers.get(HEADER)), token)
        # A URL whose document is withheld (noindex) holds a marked id: see outbox.withheld_id.
        withheld = lease.document_id is not None and outbox.delivered_id(lease.document_id) is None
        # The same bytes as last time: nothing to re-parse, unless the X-Robots-Tag header
        # disagrees with what the URL holds (the same meta tags cannot tell it apart).
        if key == lease.content_hash and said.noindex == withheld:
            await self._put_local(key, resp.body)  # touched: the sweeper sees it in use
            return self._checked(
                lease, resp, now, changed=False, reason=Reason.CONTENT_UNCHANGED.value,
                record=self.record(lease, resp, Reason.CONTENT_UNCHANGED.value, body_key=key),
                content_hash=key,
            )  # fmt: skip
        try:
            parsed = await self._extract(key, lease, resp)
        except ParserFailure as exc:  # crashed, looped or ballooned: this page only
            await self._put_local(key, resp.body)  # its worker may have died before that
            record = self.record(lease, resp, exc.reason, body_key=key, error=exc.detail)
            return Outcome(UrlState.QUARANTINED, exc.reason, revisit, status=resp.status,
                           record=record)  # fmt: skip
        choice, doc_key = await self._rendered(lease, resp, parsed), key
        if choice is not None and choice.parsed is not None and choice.body is not None:
            # the document is the rendered page's: its DOM is stored as the document's body
            # (re-extraction reads it), its parse replaces the raw one, links and meta included
            parsed = choice.parsed
            doc_key = await self._blob(self.bodies.put, choice.body)
            await self._blob(self.bodies.put_extraction, doc_key, d.EXTRACTION_VERSION,
                             parsed["extraction"])  # fmt: skip
        subs: dict[str, Any] = {"subrequests": choice.subrequests} if choice else {}
        rules = said | meta_directives(parsed["meta"], token)
        links = self._page_links(lease, parsed, rules.nofollow)
        ext = parsed["extraction"]
        # what the URL holds: the text, or the text withheld (a change in either is news)
        holds = outbox.withheld_id(ext["text_hash"]) if rules.noindex else ext["text_hash"]
        if holds == lease.document_id:  # other bytes (a clock, an ad), same text
            return self._checked(
                lease, resp, now, changed=False, reason=Reason.CONTENT_UNCHANGED.value,
                record=self.record(lease, resp, Reason.CONTENT_UNCHANGED.value, body_key=key),
                content_hash=key, links=links, **subs,
            )  # fmt: skip
        record = self.record(lease, resp, Reason.FETCHED.value, body_key=key)
        withdrawn = outbox.delivered_id(lease.document_id) if rules.noindex else None
        document = Document(
            fetch_id=record.fetch_id, url=lease.url, origin=lease.origin, title=ext["title"],
            author=ext["author"], published=ext["date"], description=ext["description"],
            language=parsed["language"], text_hash=ext["text_hash"],
            text_chars=text_chars(ext), canonical_hint=parsed["canonical"],
            charset=parsed["charset"], body_key=doc_key, links_out=len(links),
            extraction_version=ext["extraction_version"], fetched_at=resp.started_at,
            # noindex: stored and deduped, not indexed; what an earlier upsert delivered for
            # this URL is withdrawn by a delete event (outbox.upsert_events)
            index_reason=Reason.NOINDEX.value if rules.noindex else None,
            withdrawn_document_id=withdrawn,
            render_reason=choice.reason if choice else None,
        )  # fmt: skip
        return self._checked(
            lease, resp, now, changed=lease.document_id is not None,
            reason=Reason.FETCHED.value, record=record, content_hash=key, links=links,
            document=document, document_id=holds, **subs,
        )  # fmt: skip

    async def _rendered(self, lease: Lease, resp: Response,
                        raw: dict[str, Any]) -> RenderChoice | None:  # fmt: skip
        """The render lane's choice for an HTML page (None: no lane, or not HTML)."""
        ctype = resp.headers.get("content-type") or ""
        if self.render is None or "html" not in ctype.lower():
            return None
        return await self.render.consider(lease.url, lease.origin, resp.body, ctype, raw)

    async def extract_dom(self, dom: bytes, url: str) -> dict[str, Any]:
        """A rendered page's DOM parsed like any page (in the parser pool, text wanted)."""
        fut = self.pool.submit(dom, url, "utf-8", True, meta_names(self.cfg.robots_token))
        return await asyncio.wrap_future(fut)

    def _revisit_policy(self, origin: str) -> RevisitPolicy:
        """The configured bounds, or an operator's for this origin or its domain."""
        policy = self._revisit_by_origin.get(origin)
        if policy is None:
            lo = override_for(self.overrides, origin, "revisit_min_s")
            hi = override_for(self.overrides, origin, "revisit_max_s")
            policy = replace(self.revisits,
                             min_interval_s=lo if lo is not None else self.revisits.min_interval_s,
                             max_interval_s=hi if hi is not None else self.revisits.max_interval_s)  # fmt: skip
            self._revisit_by_origin[origin] = policy
        return policy

    def _freshness_target(self, priority: float) -> float:
        """A URL's freshness class target: its revisit interval never exceeds it."""
        return self._classes[freshness_class(priority, list(self._classes.values()))].target_s

    def _page_links(
        self, lease: Lease, parsed: dict[str, Any], nofollow: bool = False
    ) -> list[Any]:
        """The page's link rows and candidates. A page that says nofollow (meta robots or
        X-Robots-Tag) has its links recorded as meta_nofollow and none queued, unless
        scope.follow_nofollow, the rule rel=nofollow follows; its canonical hint and the
        parent paths are not links it offers, and stand."""
        base = lease.url
        if parsed["base_href"]:
            try:
                base = normalize(parsed["base_href"], lease.url, self.guard.tracking)
            except BadUrl:
                base = lease.url
        rows = self.guard.page_links(parsed["links"], base, lease.url, lease.depth,
                                     self._policies.get(lease.origin), parsed["canonical"])  # fmt: skip
        if not nofollow or self.cfg.scope.follow_nofollow:
            return rows
        # the links scope would have queued (admitted or robots-blocked); rejected ones keep
        # the reason that came first, as a rel=nofollow link keeps its own
        return [({**row, "reason": Reason.META_NOFOLLOW.value}, None)
                if row["kind"] == "link" and cand is not None else (row, cand)
                for row, cand in rows]  # fmt: skip

    def _checked(
        self,
        lease: Lease,
        resp: Response,
        now: float,
        changed: bool,
        reason: str,
        record: FetchRecord,
        **content: Any,
    ) -> Outcome:
        """A content check: its observation joins the URL's history, which sets the next
        visit; an answer to a conditional request says whether the validators told the truth."""
        observed = None
        if lease.document_id is not None and lease.last_checked_at is not None:
            observed = (max(now - lease.last_checked_at, 0.0), changed)
        plan = next_revisit(self._revisit_policy(lease.origin),
                            load_history(lease.change_history), observed,
                            lease.priority, lease.revisit_interval_s, self.rng,
                            self._freshness_target(lease.priority))  # fmt: skip
        validators = None
        if conditional(lease):
            # a 200 for content that had not changed: the ETag churns or the origin ignores
            # conditional requests (seed 003 decision 16); a 304 or a real change is honest
            validators = "honest" if resp.status == 304 or changed else "misleading"
        return Outcome(
            UrlState.FETCHED, reason, now + plan.interval_s, status=resp.status,
            etag=resp.headers.get("etag"), last_modified=resp.headers.get("last-modified"),
            record=record, checked=True, changed=changed,
            change_history=dump_history(plan.history), revisit_reason=plan.reason,
            revisit_interval_s=plan.interval_s, change_rate=plan.rate_per_s,
            validators=validators, **content,
        )  # fmt: skip


def conditional(lease: Lease) -> bool:
    """Were validators sent? Not to an origin whose validators proved misleading: there the
    content hash alone decides (seed 003 decision 16)."""
    return lease.conditional and bool(lease.etag or lease.last_modified)


def redacted(location: str | None) -> str | None:
    """A Location header as the fetch record keeps it: credentials never stored."""
    return None if location is None else redact_userinfo(location)
