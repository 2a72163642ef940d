-- Frontier snapshots, one row per URL selected for a (cycle, shard).
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(url as varchar) as url,
    cast(origin as varchar) as origin,
    cast(depth as integer) as depth,
    cast(priority as double) as priority,
    cast(state as varchar) as state,
    cast(reason as varchar) as reason,
    cast(due_at as timestamptz) as due_at,
    cast(attempts as integer) as attempts,
    cast(selected_at as timestamptz) as selected_at
from {{ source('lake', 'frontier') }}
