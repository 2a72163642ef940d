"""The control plane: who owns each origin, under which token, until when; every answer audited.

It is a store of its own, apart from every region's coordination store: PostgreSQL when regions
run on several machines, SQLite embedded for one. Each call is one short transaction, so
several regions (and several runs of one region) can ask at once: on PostgreSQL the asked rows
are locked in origin order, on SQLite the transaction is IMMEDIATE. The rules it applies are
`ownership.decide`; this module only reads rows, calls it and writes what it decided.

The schema is created when first opened (`metadata.create_all`); a later change to it gets a
numbered migration as the coordination store's do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..coordination.migrate import engine_for
from ..coordination.tables import Real, Seq
from ..errors import AtlasError
from .ownership import Action, Ask, Holding, TakeoverRule, Verdict, decide

metadata = sa.MetaData()

holdings = sa.Table(
    "ownership",
    metadata,
    sa.Column("origin", sa.Text, primary_key=True),
    sa.Column("region", sa.Text),
    sa.Column("token", sa.BigInteger, nullable=False),
    sa.Column("lease_until", Real, nullable=False),
    sa.Column("renewed_at", Real, nullable=False),
    sa.Column("first_asked_at", Real, nullable=False),
)

# every region's last call: a home region silent for `home_silent_s` is down (failover)
seen = sa.Table(
    "regions_seen",
    metadata,
    sa.Column("region", sa.Text, primary_key=True),
    sa.Column("seen_at", Real, nullable=False),
)

events = sa.Table(
    "ownership_events",
    metadata,
    sa.Column("seq", Seq, sa.Identity(), primary_key=True),
    sa.Column("at", Real, nullable=False),
    sa.Column("origin", sa.Text, nullable=False),
    sa.Column("region", sa.Text, nullable=False),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("asked_token", sa.BigInteger, nullable=False),
    sa.Column("token", sa.BigInteger, nullable=False),
    sa.Column("lease_until", Real, nullable=False),
    sa.Column("holder", sa.Text),
    sa.Column("detail", sa.Text, nullable=False),
)


PLANE = "(control plane)"  # the regions_seen row of the plane's return after nobody called


class ControlPlaneUnavailable(AtlasError):
    """The control plane could not be reached, or rolled the call back: nothing changed."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One origin's answer: the verdict and who holds the origin after it."""

    origin: str
    verdict: Verdict
    holder: str | None
    holder_until: float


class ControlPlane:
    def __init__(self, url: str, rule: TakeoverRule, timeout_s: float = 5.0) -> None:
        self.url, self.rule = url, rule
        self._engine = engine_for(url, timeout_s)
        with self._tx() as c:
            metadata.create_all(c)

    def close(self) -> None:
        self._engine.dispose()

    @contextmanager
    def _tx(self) -> Iterator[sa.Connection]:
        try:
            with self._engine.connect() as c, c.begin():
                yield c
        except sa.exc.OperationalError as exc:
            raise ControlPlaneUnavailable(
                f"the control plane at {_redact(self.url)} did not answer: {exc.orig}"
            ) from exc

    def ask(self, region: str, asks: Sequence[tuple[str, int, str]], now: float) -> list[Answer]:
        """Grant, renew or refuse each (origin, token held, its home region) in one
        transaction; the call also says this region is up."""
        wanted = sorted({a[0] for a in asks})
        with self._tx() as c:
            homes_seen = self._seen(c, region, now)
            if not asks:
                return []
            fresh = [{"origin": o, "region": None, "token": 0, "lease_until": 0.0,
                      "renewed_at": 0.0, "first_asked_at": now} for o in wanted]  # fmt: skip
            c.execute(_insert_absent(c, holdings), fresh)
            query = sa.select(holdings).where(holdings.c.origin.in_(wanted))
            query = query.order_by(holdings.c.origin)
            if c.dialect.name == "postgresql":
                query = query.with_for_update()
            rows = {r.origin: r for r in c.execute(query)}
            answers, changes, log = [], [], []
            for origin, token, home in asks:
                row = rows[origin]
                current = Holding(row.region, int(row.token), float(row.lease_until),
                                  float(row.renewed_at), float(row.first_asked_at))  # fmt: skip
                ask = Ask(region, token, home == region, homes_seen.get(home, homes_seen[PLANE]))
                verdict = decide(current, ask, now, self.rule)
                holder, until = row.region, float(row.lease_until)
                if verdict.held:
                    holder, until = region, verdict.lease_until
                    changes.append({"o": origin, "region": region, "token": verdict.token,
                                    "until": until, "at": now})  # fmt: skip
                answers.append(Answer(origin, verdict, holder, until))
                log.append(_event(now, origin, region, token, verdict, holder))
            if changes:
                c.execute(
                    holdings.update()
                    .where(holdings.c.origin == sa.bindparam("o"))
                    .values(region=sa.bindparam("region"), token=sa.bindparam("token"),
                            lease_until=sa.bindparam("until"), renewed_at=sa.bindparam("at")),
                    changes,
                )  # fmt: skip
            c.execute(events.insert(), log)
        return answers

    def _seen(self, c: sa.Connection, region: str, now: float) -> dict[str, float]:
        """Record that `region` called now; every region's last call, each counted from no
        earlier than the plane's own return: when no region at all called for a lease, the
        plane was out of everyone's reach, and silence in that time says nothing of a region
        (without this, the first region back would take every other region's origins)."""
        rows = {r.region: float(r.seen_at) for r in c.execute(sa.select(seen))}
        last = max((t for r, t in rows.items() if r != PLANE), default=None)
        marks = {region: now}
        if last is None or now - last >= self.rule.lease_s:
            marks[PLANE] = now
        dialect = postgresql if c.dialect.name == "postgresql" else sqlite
        for name, at in marks.items():
            c.execute(
                dialect.insert(seen).values(region=name, seen_at=at)
                .on_conflict_do_update(index_elements=["region"], set_={"seen_at": at})
            )  # fmt: skip
        rows.update(marks)
        back = rows[PLANE]
        return {r: max(t, back) for r, t in rows.items() if r != PLANE} | {PLANE: back}

    def release(self, region: str, origins: Sequence[tuple[str, int]], now: float) -> int:
        """Give up origins this region holds under these tokens (a run that finished its
        work); the token stays, so the next holder's is higher. Returns how many."""
        released = 0
        with self._tx() as c:
            for origin, token in sorted(origins):
                done = c.execute(
                    holdings.update()
                    .where(holdings.c.origin == origin, holdings.c.region == region,
                           holdings.c.token == token)
                    .values(region=None, lease_until=now),
                ).rowcount  # fmt: skip
                if done:
                    released += 1
                    c.execute(events.insert(), [{
                        "at": now, "origin": origin, "region": region,
                        "action": Action.RELEASE.value, "asked_token": token, "token": token,
                        "lease_until": now, "holder": None, "detail": "released",
                    }])  # fmt: skip
        return released

    def events_after(self, seq: int, limit: int = 10_000) -> list[dict[str, Any]]:
        """Audit rows after `seq`, oldest first (the `ownership` lake table's source)."""
        with self._tx() as c:
            rows = c.execute(
                sa.select(events).where(events.c.seq > seq).order_by(events.c.seq).limit(limit)
            )
            return [dict(r._mapping) for r in rows]

    def events_for(self, origins: Sequence[str], since: float) -> list[dict[str, Any]]:
        """Audit rows about `origins` from `since` (epoch s) on, oldest first."""
        with self._tx() as c:
            rows = c.execute(
                sa.select(events)
                .where(events.c.origin.in_(sorted(set(origins))), events.c.at >= since)
                .order_by(events.c.seq)
            )
            return [dict(r._mapping) for r in rows]

    def holding(self, origin: str) -> Holding | None:
        with self._tx() as c:
            row = c.execute(sa.select(holdings).where(holdings.c.origin == origin)).first()
        if row is None:
            return None
        return Holding(row.region, int(row.token), float(row.lease_until), float(row.renewed_at),
                       float(row.first_asked_at))  # fmt: skip


def _insert_absent(c: sa.Connection, table: sa.Table) -> Any:
    dialect = postgresql if c.dialect.name == "postgresql" else sqlite
    return dialect.insert(table).on_conflict_do_nothing(index_elements=["origin"])


def _event(now: float, origin: str, region: str, asked: int, verdict: Verdict,
           holder: str | None) -> dict[str, Any]:  # fmt: skip
    # a renewal is logged as well: the audit shows each lease's whole life, token by token
    return {"at": now, "origin": origin, "region": region, "action": verdict.action.value,
            "asked_token": asked, "token": verdict.token, "lease_until": verdict.lease_until,
            "holder": holder, "detail": verdict.detail}  # fmt: skip


def _redact(url: str) -> str:
    from ..urls import redact_userinfo

    return redact_userinfo(url)
