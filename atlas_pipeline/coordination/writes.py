"""The store's many-row writes in their two forms: per row for SQLite (one statement a row,
:named parameters) and as one statement for all rows on PostgreSQL (core.Many).

A group commit of 8 pages wrote about 45 statements on PostgreSQL, one per row; each costs
the server an executor start and the client a round of psycopg's Python. Here each write is
one statement, its rows one JSON array (json.dumps is C; psycopg dumps list parameters element
by element in Python), read with json_to_recordset.
"""

from __future__ import annotations

from .core import _INSERT_RECORD, Many

RELEASE = Many(
    """UPDATE urls SET slot_held = 0 WHERE url = :url AND fence = :fence AND state = 'leased'""",
    """UPDATE urls u SET slot_held = 0
       FROM json_to_recordset(%(rows)s::json) AS v(url text, fence int)
       WHERE u.url = v.url AND u.fence = v.fence AND u.state = 'leased'
         AND u.url = ANY(%(keys)s)""",
    key="url",
)
LEASE = Many(
    """UPDATE urls SET state = 'leased', lease_id = :lease_id, lease_expires_at = :expires_at,
         fence = :fence, attempts = attempts + 1, slot_held = 1,
         robots_version = :robots_version, extended = 0
       WHERE url = :url""",
    """UPDATE urls u SET state = 'leased', lease_id = v.lease_id,
         lease_expires_at = v.expires_at, fence = v.fence, attempts = u.attempts + 1,
         slot_held = 1, robots_version = v.robots_version, extended = 0
       FROM json_to_recordset(%(rows)s::json)
         AS v(url text, lease_id text, expires_at float8, fence int, robots_version int)
       WHERE u.url = v.url AND u.url = ANY(%(keys)s)""",
    key="url",
)
BLOCK = Many(
    """UPDATE urls SET state = 'blocked', reason = :reason, robots_version = :version
       WHERE seq = :seq""",
    """UPDATE urls u SET state = 'blocked', reason = v.reason, robots_version = v.version
       FROM json_to_recordset(%(rows)s::json) AS v(seq int8, reason text, version int)
       WHERE u.seq = v.seq AND u.seq = ANY(%(keys)s)""",
    key="seq",
)
# a claim's origins: clocks advanced, robots leases taken (SQLite binds the flag as 0 or 1)
CLOCK = Many(
    """UPDATE origins SET next_eligible_at = :next_eligible_at,
         robots_lease_id = CASE WHEN :robots THEN :lease_id ELSE robots_lease_id END,
         robots_lease_until = CASE WHEN :robots THEN :lease_until ELSE robots_lease_until END
       WHERE origin = :origin""",
    """UPDATE origins o SET next_eligible_at = v.next_eligible_at,
         robots_lease_id = CASE WHEN v.robots THEN v.lease_id ELSE o.robots_lease_id END,
         robots_lease_until = CASE WHEN v.robots THEN v.lease_until
                              ELSE o.robots_lease_until END
       FROM json_to_recordset(%(rows)s::json) AS v(origin text, next_eligible_at float8,
                                                   robots bool, lease_id text, lease_until float8)
       WHERE o.origin = v.origin AND o.origin = ANY(%(keys)s)""",
    key="origin",
)


TRAP_COUNTS = Many(
    """INSERT INTO trap_counts (origin, kind, key, n) VALUES (:origin, :kind, :key, :n)
       ON CONFLICT (origin, kind, key) DO UPDATE SET n = trap_counts.n + excluded.n""",
    """INSERT INTO trap_counts (origin, kind, key, n)
       SELECT origin, kind, key, n
       FROM json_to_recordset(%(rows)s::json) AS v(origin text, kind text, key text, n int8)
       ON CONFLICT (origin, kind, key) DO UPDATE SET n = trap_counts.n + excluded.n""",
)
# an origin's URLs queued in its admission cycle (frontier selection writes it too)
ADMITTED = Many(
    """UPDATE origins SET admitted_cycle = :cycle, admitted_count = :n WHERE origin = :origin""",
    """UPDATE origins o SET admitted_cycle = v.cycle, admitted_count = v.n
       FROM json_to_recordset(%(rows)s::json) AS v(origin text, cycle text, n int)
       WHERE o.origin = v.origin AND o.origin = ANY(%(keys)s)""",
    key="origin",
)


NEW_ORIGINS = Many(
    """INSERT INTO origins
       (origin, shard, min_gap_s, max_in_flight, registrable_domain, bucket, fair_class)
       VALUES (:origin, :shard, :min_gap_s, :max_in_flight, :registrable_domain, :bucket,
               :fair_class)
       ON CONFLICT DO NOTHING""",
    """INSERT INTO origins
       (origin, shard, min_gap_s, max_in_flight, registrable_domain, bucket, fair_class)
       SELECT origin, shard, min_gap_s, max_in_flight, registrable_domain, bucket, fair_class
       FROM json_to_recordset(%(rows)s::json) AS v(origin text, shard int, min_gap_s float8,
           max_in_flight int, registrable_domain text, bucket text, fair_class text)
       ON CONFLICT DO NOTHING""",
)


# fetch_records: a statement may meet a fetch id once, so commits pass each id's last row
RECORDS = Many(
    _INSERT_RECORD,
    """INSERT INTO fetch_records
         (fetch_id, cycle, shard, url, fence, record, links, document, body_key, committed_at)
       SELECT fetch_id, cycle, shard, url, fence, record, links, document, body_key,
              committed_at
       FROM json_to_recordset(%(rows)s::json) AS v(fetch_id text, cycle text, shard int,
           url text, fence int, record text, links text, document text, body_key text,
           committed_at float8)
       ON CONFLICT (fetch_id) DO UPDATE SET fence = excluded.fence, record = excluded.record,
           links = excluded.links, document = excluded.document, body_key = excluded.body_key,
           committed_at = excluded.committed_at""",
)
