"""One URL's whole history, so every decision about it is explained (`atlas inspect URL`).

The coordination store has the URL's current catalogue row, its origin's robots policy in
force, stale attempts and the operator log; the lake has every fetch, the links that point
at it, its documents, dedupe labels and index events. `inspect_url` gathers them into an
`Inspection` whose `verdict` says in one line where the URL stands and why; `render` prints
it for people, `Inspection.as_json` for machines.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from . import robots as robots_rules
from .coordination import Suppression
from .crawl import Engine
from .errors import AtlasError
from .lake import Lake
from .reasons import Reason, explain
from .robots import RobotsPolicy, RobotsStatus
from .scope import ScopeGuard
from .traps import strip_session_ids
from .urls import BadUrl, host_of, normalize, origin_of, path_of, registrable_domain

LIST_LIMIT = 20  # rows of a long list (links to a popular page) shown in the text report
CLUSTER_PEERS = 5  # other URLs of a dedupe cluster named in the report

_FETCH_COLUMNS = ["crawl_cycle", "fetch_id", "kind", "started_at", "status", "reason", "bytes",
                  "elapsed_s", "conditional", "original_url", "redirect_chain", "location",
                  "final_url", "fence", "batch_fence", "attempt", "robots_version", "error",
                  "etag", "last_modified", "content_type", "body_key"]  # fmt: skip
_LINK_COLUMNS = ["crawl_cycle", "fetch_id", "source_url", "href", "anchor", "kind", "nofollow",
                 "depth", "reason"]  # fmt: skip
_DOC_COLUMNS = ["crawl_cycle", "fetch_id", "fetched_at", "title", "text_hash", "text_chars",
                "language", "extraction_version", "canonical_hint", "body_key"]  # fmt: skip
_DEDUPE_COLUMNS = ["crawl_cycle", "fetch_id", "document_id", "cluster_id", "similarity",
                   "threshold", "method", "canonical_url", "canonical_confirmed"]  # fmt: skip
_EVENT_COLUMNS = ["crawl_cycle", "event_id", "action", "document_id", "fetch_id", "fetched_at",
                  "extraction_version", "title"]  # fmt: skip
# catalogue and log columns holding epoch seconds
_EPOCH_FIELDS = frozenset({"due_at", "discovered_at", "last_fetch_at", "last_checked_at",
                           "lease_expires_at", "at", "fetched_at", "expires_at"})  # fmt: skip


class InspectError(AtlasError):
    """The URL cannot be inspected (not a URL, or no crawl data to look in)."""


@dataclass(frozen=True, slots=True)
class RobotsVerdict:
    """What one robots policy says about one URL, and which rule of it decided."""

    allowed: bool
    why: str  # one line: the deciding rule, or the status that decided without rules
    group: str | None = None  # the User-agent group that applies ("*" or a product token)
    rule: str | None = None  # "Disallow: /private/" (the normalized pattern), None if none


@dataclass
class Inspection:
    """Everything known about one URL; `known` is False when the crawl never saw it."""

    query: str  # as given
    url: str  # canonical
    origin: str
    domain: str
    verdict: str
    known: bool
    catalogue: dict[str, Any] | None = None
    links: list[dict[str, Any]] = field(default_factory=list)
    fetches: list[dict[str, Any]] = field(default_factory=list)
    robots: dict[str, Any] | None = None
    stale_attempts: list[dict[str, Any]] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)
    dedupe: list[dict[str, Any]] = field(default_factory=list)
    index_events: list[dict[str, Any]] = field(default_factory=list)
    pauses: list[dict[str, Any]] = field(default_factory=list)
    operator_log: list[dict[str, Any]] = field(default_factory=list)
    url_rule: str | None = None  # the rule of scope.url_rules that decides it, described
    hint: str | None = None

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict: timestamps as ISO 8601 UTC strings."""
        out: dict[str, Any] = {
            "query": self.query, "url": self.url, "known": self.known,
            "verdict": self.verdict, "origin": self.origin, "domain": self.domain,
            "catalogue": self.catalogue, "discovered_by": self.links, "fetches": self.fetches,
            "robots": self.robots, "stale_attempts": self.stale_attempts,
            "documents": self.documents, "dedupe": self.dedupe,
            "index_events": self.index_events,
            "operator": {"pauses": self.pauses, "log": self.operator_log},
            "url_rule": self.url_rule,
        }  # fmt: skip
        if self.hint:
            out["hint"] = self.hint
        out["reasons"] = self.explained()
        return {k: _plain(v) for k, v in out.items()}

    def explained(self) -> dict[str, str]:
        """Each reason code this inspection shows that has an explanation, with it."""
        rows = [self.catalogue or {}, *self.links, *self.fetches, *self.documents]
        codes = [str(r[k]) for r in rows for k in ("reason", "final_reason") if r.get(k)]
        return {code: text for code in dict.fromkeys(codes) if (text := explain(code))}


# ---------------------------------------------------------------- gathering


def canonical_url(engine: Engine, raw: str) -> str:
    """The catalogue's spelling of `raw`: normalized with the config's tracking rules and
    session parameters dropped, as the scope guard spells every link it admits."""
    given = raw.strip()
    try:
        url = normalize(given, None, engine.cfg.tracking_policy())
    except BadUrl as exc:
        problem = str(exc).removeprefix(f"{given!r}: ")
        raise InspectError(
            f"bad URL {given!r}: {problem}; give an absolute http:// or https:// URL, "
            "e.g. http://example.com/page"
        ) from None
    return strip_session_ids(url, frozenset(engine.cfg.scope.session_params))


def check_crawl_data(coordination_url: str) -> None:
    """A SQLite store that does not exist yet means this config never crawled: say so rather
    than create an empty store and report every URL unknown."""
    if coordination_url.startswith("sqlite:///"):
        path = Path(coordination_url.removeprefix("sqlite:///"))
        if not path.exists():
            raise InspectError(
                f"no crawl data: the coordination store {path} does not exist; "
                "run `atlas crawl --config ...` with this config first"
            )


def inspect_url(engine: Engine, raw: str, now: float | None = None) -> Inspection:
    """Gather the history of `raw` (any spelling of the URL) from the store and the lake."""
    now = time.time() if now is None else now
    url = canonical_url(engine, raw)
    store, lake = engine.store, engine.lake
    row = store.url_row(url)
    origin = str(row["origin"]) if row else origin_of(url)
    domain = registrable_domain(host_of(url))
    ins = Inspection(raw, url, origin, domain, "", known=False)
    decided = ScopeGuard(engine.cfg).rules.decide(url, origin)
    ins.url_rule = decided.describe() if decided is not None else None
    if row is not None:
        row = dict(row)
        chain = row.get("redirect_chain")
        row["redirect_chain"] = json.loads(chain) if chain else []
        row["validators_trusted"] = (
            None if row.get("validators_trusted") is None else bool(row["validators_trusted"])
        )
        ins.catalogue = row
    ins.links = _lake_rows(lake, "links", pl.col("url") == url, _LINK_COLUMNS,
                           ["crawl_cycle", "source_url"])  # fmt: skip
    ins.fetches = _lake_rows(lake, "fetches", pl.col("url") == url, _FETCH_COLUMNS,
                             ["started_at"])  # fmt: skip
    ins.links = _first_link_first(ins.links, row)
    ins.known = row is not None or bool(ins.links) or bool(ins.fetches)
    ins.stale_attempts = [_stale(r) for r in store.stale_attempts_of(url)]
    ins.documents = _lake_rows(lake, "documents", pl.col("url") == url, _DOC_COLUMNS,
                               ["fetched_at"])  # fmt: skip
    ins.dedupe = _dedupe(lake, url)
    ins.index_events = _lake_rows(lake, "index_ready", pl.col("url") == url, _EVENT_COLUMNS,
                                  ["fetched_at", "crawl_cycle"])  # fmt: skip

    def touches(r: dict[str, Any]) -> bool:
        return (r["scope"], r["value"]) in (("origin", origin), ("domain", domain))

    ins.pauses = [r for r in store.pauses() if touches(r)]
    ins.operator_log = [r for r in store.operator_log() if touches(r)]
    ins.robots = _robots(engine, ins)
    suppressed = [s for s in store.suppressions()
                  if Suppression(s["scope"], s["value"]).matches(url)]  # fmt: skip
    ins.operator_log += [r for r in store.operator_log()
                         if any((r["scope"], r["value"]) == (s["scope"], s["value"])
                                for s in suppressed) and r not in ins.operator_log]  # fmt: skip
    if suppressed:  # its data is gone by design; the audited suppression explains why
        ins.known, s = True, suppressed[0]
        ins.verdict = (f"suppressed by an opt-out of {s['scope']} {s['value']} at {_ts(s['at'])} "
                       f"by {s['who']}: {s['reason']}; never fetched again, its data purged")  # fmt: skip
    elif ins.known:
        ins.verdict = _verdict(ins, now)
    else:
        ins.verdict = "never seen: no catalogue row, no link and no fetch names this URL"
        ins.hint = _unknown_hint(engine, ins)
    return ins


def _lake_rows(
    lake: Lake, table: str, where: pl.Expr, columns: list[str], order: list[str]
) -> list[dict[str, Any]]:
    """The rows of a Delta table matching `where` (pushed down to the scan), in `order`."""
    if not lake.exists(table):
        return []
    scan = pl.scan_delta(lake.uri(table), storage_options=lake.storage_options)
    names = scan.collect_schema().names()
    cols = [c for c in columns if c in names]
    frame = scan.filter(where).select(cols).collect()
    keys = [c for c in order if c in cols]
    return frame.sort(keys, nulls_last=True).to_dicts() if keys else frame.to_dicts()


def _first_link_first(
    links: list[dict[str, Any]], row: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The link that admitted the URL (its catalogue source, in its discovery cycle) first,
    marked `first`; the others after it in (cycle, source) order."""
    marked = [{**link, "first": False} for link in links]
    if row is None:
        return marked
    for i, link in enumerate(marked):
        if (link["source_url"], link["crawl_cycle"]) == (row.get("source"),
                                                         row.get("discovered_cycle")):  # fmt: skip
            link["first"] = True
            return [link, *marked[:i], *marked[i + 1 :]]
    return marked


def _dedupe(lake: Lake, url: str) -> list[dict[str, Any]]:
    """The URL's dedupe labels, each with the other URLs sharing its cluster."""
    rows = _lake_rows(lake, "dedupe_clusters", pl.col("url") == url, _DEDUPE_COLUMNS,
                      ["crawl_cycle"])  # fmt: skip
    clusters = sorted({r["cluster_id"] for r in rows if r.get("cluster_id")})
    peers: dict[str, list[str]] = {c: [] for c in clusters}
    if clusters:
        scan = pl.scan_delta(lake.uri("dedupe_clusters"), storage_options=lake.storage_options)
        found = (
            scan.filter(pl.col("cluster_id").is_in(clusters) & (pl.col("url") != url))
            .select("cluster_id", "url")
            .unique()
            .sort("cluster_id", "url")
            .collect()
        )
        for cluster, other in found.iter_rows():
            peers[cluster].append(other)
    return [{**r, "cluster_peers": peers.get(r.get("cluster_id") or "", [])} for r in rows]


def _stale(row: dict[str, Any]) -> dict[str, Any]:
    record = json.loads(row["record"]) if row.get("record") else {}
    return {"cycle": row["cycle"], "at": row["at"], "fence": row["fence"],
            "status": record.get("status"), "reason": record.get("reason"),
            "fetch_id": record.get("fetch_id")}  # fmt: skip


# ---------------------------------------------------------------- robots


def explain_robots(policy: RobotsPolicy, url: str, token: str) -> RobotsVerdict:
    """What `policy` says for `url` and the rule that decided (RFC 9309: the longest
    matching rule of the group for `token`, an Allow winning a tie)."""
    allowed = policy.allows(url, token)
    path = path_of(url)
    if path == "/robots.txt" or path.startswith("/robots.txt?"):
        return RobotsVerdict(allowed, "/robots.txt itself is always allowed")
    if policy.status is RobotsStatus.UNAVAILABLE:
        return RobotsVerdict(allowed, "robots.txt unavailable (4xx): no rules, all allowed")
    if policy.status is RobotsStatus.UNREACHABLE:
        return RobotsVerdict(allowed, "robots.txt unreachable (5xx or network): nothing fetched")
    if policy.status is RobotsStatus.THROTTLED:
        return RobotsVerdict(
            allowed, "robots.txt throttled (429): nothing fetched until it answers"
        )
    # The matcher's own parse (robots.py), so the rule named is the one `allows` applied.
    parsed = robots_rules._parsed(policy.text)
    group = parsed.group_for(token)
    if group is None:
        return RobotsVerdict(allowed, f"no group for {token} and no '*' group: all allowed")
    name = next(k for k, g in parsed.groups.items() if g is group)
    target = robots_rules._normalize(path, pattern=False)
    best: tuple[int, bool, str] | None = None
    for rule in group.rules:
        if rule.matches(target):
            text = "*".join(rule.parts) + ("$" if rule.anchored else "")
            key = (rule.octets, rule.allow, f"{'Allow' if rule.allow else 'Disallow'}: {text}")
            if best is None or key[:2] > best[:2]:
                best = key
    where = f"group User-agent: {name}"
    if best is None:
        return RobotsVerdict(allowed, f"{where}: no rule matches {path}", name)
    word = "allowed" if allowed else "disallowed"
    return RobotsVerdict(allowed, f"{where}: {best[2]} matches {path} ({word})", name, best[2])


def _robots(engine: Engine, ins: Inspection) -> dict[str, Any] | None:
    """The origin's policy in force, what it says for the URL, and the versions that decided."""
    record = engine.store.robots(ins.origin)
    decided = ins.catalogue.get("robots_version") if ins.catalogue else None
    used = sorted({int(f["robots_version"]) for f in ins.fetches
                   if f.get("robots_version") is not None})  # fmt: skip
    if record is None:
        return {"current_version": None, "status": None, "decided_version": decided,
                "fetch_versions": used, "allowed": None,
                "why": "no robots.txt fetched for this origin yet"}  # fmt: skip
    policy = RobotsPolicy(record.origin, record.version, RobotsStatus(record.status), record.text)
    said = explain_robots(policy, ins.url, engine.cfg.robots_token)
    older = sorted({v for v in [decided, *used] if v is not None and v != record.version})
    note = None
    if older:
        note = (f"decided under policy v{', v'.join(map(str, older))}; the store keeps only "
                f"the current text (v{record.version}), evaluated here")  # fmt: skip
    return {
        "current_version": record.version, "status": record.status,
        "fetched_at": record.fetched_at, "expires_at": record.expires_at,
        "decided_version": decided, "fetch_versions": used, "token": engine.cfg.robots_token,
        "allowed": said.allowed, "group": said.group, "rule": said.rule, "why": said.why,
        "note": note,
    }  # fmt: skip


# ---------------------------------------------------------------- verdict


def _verdict(ins: Inspection, now: float) -> str:
    row = ins.catalogue
    if row is None:
        if ins.links:
            return _rejected(ins.links)
        last = ins.fetches[-1]
        what = "robots.txt" if last.get("kind") == "robots" else "not in the catalogue"
        r = ins.robots or {}
        policy = f"; policy v{r['current_version']} in force" if r.get("current_version") else ""
        return (f"{what}: fetched {_times(len(ins.fetches))}; last {last['status']} "
                f"{last['reason']} at {_ts(last['started_at'])}{policy}")  # fmt: skip
    state, reason = str(row["state"]), str(row["reason"])
    blocked = state == "blocked" and reason == Reason.ROBOTS_DISALLOWED.value
    if ins.fetches:
        last = ins.fetches[-1]
        text = (f"fetched {_times(len(ins.fetches))}; last {last['status']} {last['reason']} "
                f"at {_ts(last['started_at'])}")  # fmt: skip
        if blocked:
            text += "; now blocked by robots " + _robots_brief(ins)
        elif state == "fetched":
            why = row.get("revisit_reason") or "first_visit"
            text += f"; due again {_due(row['due_at'], now)} ({why})"
        elif state == "failed_retryable":
            text += f"; retry due {_due(row['due_at'], now)} ({reason}, attempt {row['attempts']})"
        elif state in ("terminal", "quarantined", "blocked"):
            text += f"; {state}: {reason}"
        else:
            text += f"; {state} in {row.get('cycle')} ({reason})"
    elif blocked:
        text = "never fetched: blocked by robots " + _robots_brief(ins)
    elif state in ("blocked", "terminal", "quarantined"):
        text = f"never fetched: {state} ({reason})"
    elif state == "discovered":
        text = f"never fetched: discovered, waiting for a cycle with budget ({reason})"
    elif state == "leased":
        text = f"never fetched yet: leased now in {row.get('cycle')} (fence {row['fence']})"
    else:
        text = f"never fetched: {state} in {row.get('cycle')} ({reason})"
    if ins.pauses:
        p = ins.pauses[0]
        text += f"; {p['scope']} {p['value']} paused by {p['who']}: {p['reason']}"
    return text


def _rejected(links: list[dict[str, Any]]) -> str:
    reasons: dict[str, int] = {}
    for link in links:
        reasons[str(link["reason"])] = reasons.get(str(link["reason"]), 0) + 1
    first = links[0]
    named = ", ".join(reasons)
    return (f"rejected at discovery: {named} ({_times(len(links), 'link')}, first from "
            f"{first['source_url']} in {first['crawl_cycle']})")  # fmt: skip


def _robots_brief(ins: Inspection) -> str:
    """(policy v2: Disallow /private/), naming the version that decided."""
    r = ins.robots or {}
    version = r.get("decided_version") or r.get("current_version")
    rule = r.get("rule") or r.get("why") or "rules unknown"
    if r.get("allowed"):
        rule = f"v{r.get('current_version')} now allows it: {r.get('why')}"
    if version is not None and version != r.get("current_version"):
        return f"(policy v{version}; the current v{r.get('current_version')} says: {rule})"
    return f"(policy v{version}: {rule})"


def _unknown_hint(engine: Engine, ins: Inspection) -> str:
    said = ScopeGuard(engine.cfg).judge(ins.url, ins.url, 0, None).reason
    hint = f"looked up as {ins.url}"
    if ins.url != ins.query.strip():
        hint += f" (the canonical form of {ins.query.strip()})"
    if not engine.lake.exists("fetches"):
        return hint + "; this crawl has written no fetches yet: run `atlas crawl` first"
    if said in (Reason.ADMITTED.value, Reason.ROBOTS_DISALLOWED.value):
        return hint + ("; it is in scope: no fetched page links to it yet (add it to seeds, "
                       "or crawl more cycles)")  # fmt: skip
    why = explain(said)
    return hint + f"; this config's scope would reject it: {said}" + (f" ({why})" if why else "")


# ---------------------------------------------------------------- text report


def render(ins: Inspection, limit: int = LIST_LIMIT) -> str:
    """A plain-text report, verdict first."""
    out = [f"verdict: {ins.verdict}", ""]
    out.append(f"url      {ins.url}")
    if ins.query.strip() != ins.url:
        out.append(f"as given {ins.query.strip()}")
    shard = ins.catalogue.get("shard") if ins.catalogue else None
    where = f", shard {shard}" if shard is not None else ""
    out.append(f"origin   {ins.origin} (domain {ins.domain}{where})")
    if ins.url_rule:
        out.append(f"rule     {ins.url_rule} decides it under this config")
    if not ins.known:
        out += ["", f"hint: {ins.hint}"]
        return "\n".join(out) + "\n"
    if reasons := ins.explained():
        out += ["", "Reasons", *(f"  {code}: {text}" for code, text in reasons.items())]
    out += ["", *_discovery_lines(ins, limit)]
    out += ["", *_catalogue_lines(ins)]
    out += ["", f"Fetches ({len(ins.fetches)})"]
    out += [line for f in ins.fetches for line in _fetch_lines(f)] or ["  none"]
    out += ["", *_robots_lines(ins)]
    out += ["", f"Stale attempts ({len(ins.stale_attempts)})"]
    out += [f"  {s['cycle']} {_ts(s['at'])}  fence {s['fence']}  {s['status']} {s['reason']} "
            "(a newer lease owned the URL: never applied)" for s in ins.stale_attempts] or ["  none"]  # fmt: skip
    out += ["", f"Documents ({len(ins.documents)})"]
    out += [f"  {d['crawl_cycle']} {_ts(d.get('fetched_at'))}  {d.get('title')!r}  text "
            f"{d.get('text_hash')} ({d.get('text_chars')} chars, {d.get('language')})  "
            f"extraction {d.get('extraction_version')}" for d in ins.documents] or ["  none"]  # fmt: skip
    out += ["", f"Dedupe ({len(ins.dedupe)})"]
    out += [line for d in ins.dedupe for line in _dedupe_lines(d)] or ["  none"]
    out += ["", f"Index events ({len(ins.index_events)})"]
    out += [f"  {e['crawl_cycle']} {e.get('action')} event {e.get('event_id')} document "
            f"{e.get('document_id')} (fetched {_ts(e.get('fetched_at'))})"
            for e in ins.index_events] or ["  none"]  # fmt: skip
    out += ["", f"Operator actions on {ins.origin} or {ins.domain}"]
    out += [f"  paused now: {p['scope']} {p['value']} by {p['who']} at {_ts(p['at'])}: "
            f"{p['reason']}" for p in ins.pauses]  # fmt: skip
    out += [f"  {_ts(r['at'])} {r['action']} {r['scope']} {r['value']} by {r['who']}: "
            f"{r['reason']}" for r in ins.operator_log]  # fmt: skip
    if not ins.pauses and not ins.operator_log:
        out.append("  none")
    return "\n".join(out) + "\n"


def _discovery_lines(ins: Inspection, limit: int) -> list[str]:
    out = ["Discovery"]
    row = ins.catalogue
    if row is not None:
        source = row.get("source") or "?"
        spelled = row.get("discovered_url")
        as_found = f' as "{spelled}"' if spelled and spelled != ins.url else ""
        out.append(f"  first seen {row.get('discovered_cycle')} at {_ts(row.get('discovered_at'))}"
                   f", depth {row.get('depth')}, from {source}{as_found}")  # fmt: skip
        if row.get("redirect_chain"):
            out.append(f"  reached by redirect: {' -> '.join(row['redirect_chain'])} -> here")
    out.append(f"  links to it ({len(ins.links)}):" if ins.links else "  no link row points at it")
    for link in ins.links[:limit]:
        anchor = (link.get("anchor") or "").strip()
        mark = "first: " if link.get("first") else ""
        out.append(f"    {mark}{link['crawl_cycle']}  {link['source_url']}  {link.get('kind')}"
                   f"{f' {anchor[:60]!r}' if anchor else ''}  -> {link['reason']}")  # fmt: skip
    if len(ins.links) > limit:
        out.append(f"    ... and {len(ins.links) - limit} more (--json lists them all)")
    return out


def _catalogue_lines(ins: Inspection) -> list[str]:
    row = ins.catalogue
    if row is None:
        return ["Catalogue", "  not in the catalogue (never admitted)"]
    out = ["Catalogue",
           f"  state     {row['state']} ({row['reason']})",
           f"  kind {row.get('kind')}, depth {row['depth']}, priority {float(row['priority']):.3f}",
           f"  cycle     {row.get('cycle') or '-'}; due {_ts(row.get('due_at'))}; attempts "
           f"{row['attempts']}; fence {row['fence']}; robots v{row.get('robots_version')}"]  # fmt: skip
    if row.get("last_fetch_at") is not None:
        out.append(f"  last fetch {_ts(row['last_fetch_at'])} status {row.get('last_status')}")
    trusted = row.get("validators_trusted")
    trust = "" if trusted is None else ("; origin validators trusted" if trusted
                                        else "; origin validators untrusted (unconditional)")  # fmt: skip
    out.append(f"  validators etag {row.get('etag')!r}, last-modified "
               f"{row.get('last_modified')!r}{trust}")  # fmt: skip
    out.append(f"  document  {row.get('document_id')} (content {row.get('content_hash')})")
    rate = row.get("change_rate")
    per_day = "unknown" if rate is None else f"{float(rate) * 86400:.3g}/day"
    interval = row.get("revisit_interval_s")
    out.append(f"  revisit   {row.get('revisit_reason') or '-'}, every "
               f"{_duration(interval)}; change rate {per_day}; checks {row.get('checks')}, "
               f"changes {row.get('changes')}")  # fmt: skip
    return out


def _fetch_lines(f: dict[str, Any]) -> list[str]:
    cond = "conditional" if f.get("conditional") else "unconditional"
    elapsed = f.get("elapsed_s")
    line = (f"  {f['crawl_cycle']} {_ts(f.get('started_at'))}  {f.get('status')} {f['reason']}  "
            f"{f.get('bytes')} B  {elapsed if elapsed is None else round(float(elapsed), 3)} s  "
            f"{cond}  fence {f.get('fence')}  attempt {f.get('attempt')}  "
            f"robots v{f.get('robots_version')}")  # fmt: skip
    out = [line]
    if f.get("redirect_chain"):
        out.append(f"      redirect chain: {' -> '.join(f['redirect_chain'])} -> here")
    if f.get("location"):
        out.append(f"      location: {f['location']}")
    if f.get("error"):
        out.append(f"      error: {f['error']}")
    return out


def _robots_lines(ins: Inspection) -> list[str]:
    r = ins.robots or {}
    if r.get("current_version") is None:
        return ["Robots", f"  {r.get('why')}"]
    out = [f"Robots (policy v{r['current_version']} in force, {r['status']}, fetched "
           f"{_ts(r.get('fetched_at'))}, refresh after {_ts(r.get('expires_at'))})",
           f"  decided by v{r.get('decided_version')} (catalogue); fetches used "
           f"{', '.join(f'v{v}' for v in r.get('fetch_versions') or []) or 'none'}",
           f"  for {r['token']}: {'ALLOWED' if r['allowed'] else 'DISALLOWED'}: {r['why']}"]  # fmt: skip
    if r.get("note"):
        out.append(f"  note: {r['note']}")
    return out


def _dedupe_lines(d: dict[str, Any]) -> list[str]:
    peers: list[str] = d.get("cluster_peers") or []
    shared = (f"shared with {len(peers)} other URL(s): " + ", ".join(peers[:CLUSTER_PEERS])
              + (" ..." if len(peers) > CLUSTER_PEERS else "")) if peers else "alone"  # fmt: skip
    return [f"  {d['crawl_cycle']} document {d.get('document_id')} cluster {d.get('cluster_id')} "
            f"({d.get('method')}, threshold {d.get('threshold')}): {shared}"]  # fmt: skip


# ---------------------------------------------------------------- formatting


def _ts(value: Any) -> str:
    """Epoch seconds or a datetime as 'YYYY-MM-DD HH:MM:SSZ'; '-' when unset."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
    else:
        if float(value) <= 0:
            return "-"
        moment = datetime.fromtimestamp(float(value), UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def _due(value: Any, now: float) -> str:
    if value is None or float(value) <= now:
        return "now"
    return f"{_ts(value)} (in {_duration(float(value) - now)})"


def _duration(seconds: Any) -> str:
    if seconds is None:
        return "-"
    s = float(seconds)
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def _times(n: int, word: str = "time") -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _plain(value: Any, key: str = "") -> Any:
    """JSON-ready: datetimes and epoch-second fields as ISO 8601 UTC strings."""
    if isinstance(value, dict):
        return {k: _plain(v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.isoformat().replace("+00:00", "Z")
    if key in _EPOCH_FIELDS and isinstance(value, int | float) and value > 0:
        return datetime.fromtimestamp(float(value), UTC).isoformat().replace("+00:00", "Z")
    return value
