"""Opt-out and deletion (seed 000 ch. 16): a verified request puts an origin, a registrable
domain or a URL prefix on the suppression list, which blocks fetches at once; then queue rows,
fetch records, lake rows, bodies and index entries are deleted or tombstoned, each step
audited. The suppression record outlives the data it removed.

Order matters: the store purge commits with the suppression (nothing of it can be claimed or
discovered after that commit), the lake and the indexer follow, and bodies go last, only those
no remaining record references. Every step is idempotent, so a purge that stopped halfway is
finished by running it again (`atlas optout` does, and so does the retention job).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import polars as pl

from . import outbox
from .coordination import Purged, Suppression
from .crawl import Engine
from .errors import ConfigError
from .lake_schema import ORIGIN_COLUMNS, SCHEMAS, URL_COLUMNS
from .urls import BadUrl, normalize, origin_of, registrable_domain

SCOPES = ("origin", "domain", "prefix")


@dataclass
class OptOutReport:
    target: Suppression
    store: Purged
    lake_rows: dict[str, int] = field(default_factory=dict)
    bodies_deleted: int = 0
    tombstones: int = 0
    delivered: int = 0


def target_of(scope: str, value: str) -> Suppression:
    """The canonical suppression target of what an operator typed; errors say what to give."""
    if scope == "origin":
        try:
            return Suppression("origin", origin_of(normalize(value)))
        except BadUrl as exc:
            raise ConfigError(
                f"origin {value!r}: {exc}; give a URL such as https://example.com/"
            ) from None
    if scope == "domain":
        host = value.strip().lower().rstrip(".")
        if not host or "/" in host or registrable_domain(host) != host:
            raise ConfigError(
                f"domain {value!r} is not a registrable domain (that would be "
                f"{registrable_domain(host)!r}); use --origin for one host"
            )
        return Suppression("domain", host)
    if scope == "prefix":
        try:
            return Suppression("prefix", normalize(value))
        except BadUrl as exc:
            raise ConfigError(
                f"prefix {value!r}: {exc}; give a URL such as https://example.com/private/"
            ) from None
    raise ConfigError(f"scope {scope!r}: use one of {', '.join(SCOPES)}")


def opt_out(
    engine: Engine,
    target: Suppression,
    reason: str,
    verification: str,
    who: str,
    on_step: Callable[[str], None] | None = None,
) -> OptOutReport:
    """Suppress `target` and purge everything of it; safe to run again. `on_step` hears the
    name of each step done (store, each lake table, tombstones, bodies)."""
    since = time.time()
    purged = engine.store.suppress(target, reason, verification, who, since)
    if on_step is not None:
        on_step("store")
    return _purge_outside_store(engine, target, purged, who, since, on_step=on_step)


STEPS = 3 + len(SCHEMAS)  # store, each lake table, tombstones, bodies


def purge_again(engine: Engine, target: Suppression, who: str) -> OptOutReport:
    """Purge an existing suppression's target once more (idempotent; the retention job runs
    it for every suppression, to catch what in-flight work may have left)."""
    since = time.time()
    purged = engine.store.purge(target, who, since)
    return _purge_outside_store(engine, target, purged, who, since, quiet=True)


def _purge_outside_store(
    engine: Engine, target: Suppression, purged: Purged, who: str, since: float,
    quiet: bool = False, on_step: Callable[[str], None] | None = None,
) -> OptOutReport:  # fmt: skip
    step = on_step or (lambda _: None)
    report = OptOutReport(target, purged)
    documents, bodies = _lake_documents_and_bodies(engine, target)
    documents |= set(purged.documents)
    bodies |= purged.body_keys
    origins = _lake_origins(engine, target) | set(purged.origins)
    for table in SCHEMAS:
        predicate = _predicate(table, target, origins)
        if predicate:
            report.lake_rows[table] = engine.lake.delete(table, predicate)
        elif table == "document_texts":  # texts are keyed by content: only the unheld go
            report.lake_rows[table] = engine.lake.prune_texts()
        step(table)
    events = list(tombstones(documents))
    report.tombstones = engine.store.add_tombstones(events, time.time())
    step("tombstones")
    swept = engine.bodies.delete(bodies, engine.store.referenced_bodies, since)
    report.bodies_deleted = swept.deleted
    step("bodies")
    if quiet and not (any(report.lake_rows.values()) or report.tombstones or swept.deleted):
        return report
    _audit(engine, "purge_lake", target, who,
           ", ".join(f"{t} {n}" for t, n in report.lake_rows.items()))  # fmt: skip
    _audit(engine, "tombstones", target, who,
           f"{report.tombstones} delete events queued for the indexer")  # fmt: skip
    _audit(engine, "purge_bodies", target, who,
           f"{swept.deleted} bodies deleted, {len(bodies) - swept.deleted} kept (still referenced)")  # fmt: skip
    return report


def tombstones(documents: Iterable[tuple[str, str, str]]) -> Iterable[dict[str, object]]:
    """One delete event per (url, document id, extraction version): the indexer drops the
    document the matching upsert event gave it."""
    for url, document_id, version in sorted(documents):
        yield {
            "event_id": outbox.event_id(url, document_id, version, outbox.DELETE),
            "action": outbox.DELETE,
            "url": url,
            "document_id": document_id,
            "fetch_id": None,
            "title": None,
            "language": None,
            "extraction_version": version,
            "fetched_at": None,
        }


def _lake_documents_and_bodies(
    engine: Engine, target: Suppression
) -> tuple[set[tuple[str, str, str]], set[str]]:
    """What the lake holds of the target, read before its rows are deleted."""
    docs = engine.lake.read("documents").select(
        "url", "text_hash", "extraction_version", "body_key"
    )
    mine = docs.filter(pl.col("url").map_elements(target.matches, return_dtype=pl.Boolean))
    documents = {
        (r[0], r[1], r[2])
        for r in mine.select("url", "text_hash", "extraction_version").iter_rows()
    }
    fetches = engine.lake.read("fetches").select("url", "body_key")
    hit = fetches.filter(pl.col("url").map_elements(target.matches, return_dtype=pl.Boolean))
    bodies = {k for k in [*mine["body_key"].to_list(), *hit["body_key"].to_list()] if k}
    return documents, bodies


def _lake_origins(engine: Engine, target: Suppression) -> set[str]:
    """Origins the lake names that the target covers (none for a URL prefix)."""
    if target.scope == "prefix":
        return set()
    found: set[str] = set()
    for table, columns in ORIGIN_COLUMNS.items():
        for column in columns:
            values = engine.lake.read(table).get_column(column).drop_nulls().unique().to_list()
            found |= {o for o in values if target.matches(o + "/")}
    return found


def _predicate(table: str, target: Suppression, origins: set[str]) -> str | None:
    """A Delta SQL predicate for the table's rows of the target."""
    terms: list[str] = []
    prefixes = (
        [target.value] if target.scope == "prefix" else sorted(_url_prefix(o) for o in origins)
    )
    for column in URL_COLUMNS[table]:
        terms += [f"starts_with({column}, {_quote(p)})" for p in prefixes]
    if target.scope != "prefix" and origins:
        listed = ", ".join(_quote(o) for o in sorted(origins))
        terms += [f"{column} IN ({listed})" for column in ORIGIN_COLUMNS[table]]
    return " OR ".join(terms) or None


def _url_prefix(origin: str) -> str:
    """scheme://host:port -> the prefix its canonical URLs start with (default port dropped)."""
    scheme, _, rest = origin.partition("://")
    host, _, port = rest.rpartition(":")
    default = {"http": "80", "https": "443"}.get(scheme)
    return f"{scheme}://{host if port == default else rest}/"


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _audit(engine: Engine, action: str, target: Suppression, who: str, detail: str) -> None:
    engine.store.audit(action, target.scope, target.value, detail, who, time.time())
