-- One row per checked URL per (cycle, shard): when it is due again and why, its estimated
-- change rate, and its staleness (time since the last check) against its class target.
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(url as varchar) as url,
    cast(origin as varchar) as origin,
    cast(priority as double) as priority,
    cast(freshness_class as varchar) as freshness_class,
    cast(state as varchar) as state,
    cast(last_checked_at as timestamptz) as last_checked_at,
    cast(next_due_at as timestamptz) as next_due_at,
    cast(interval_s as double) as interval_s,
    cast(reason as varchar) as reason,
    cast(changes_per_day as double) as changes_per_day,
    cast(checks as bigint) as checks,
    cast(changes as bigint) as changes,
    cast(validators_trusted as boolean) as validators_trusted,
    cast(staleness_s as double) as staleness_s,
    cast(target_s as double) as target_s,
    cast(stale as boolean) as stale
from {{ source('lake', 'recrawl_schedule') }}
