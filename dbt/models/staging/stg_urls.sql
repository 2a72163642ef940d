-- URL catalogue, one row per URL (the grain of lake.urls).
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(url as varchar) as url,
    cast(discovered_url as varchar) as discovered_url,
    cast(origin as varchar) as origin,
    cast(depth as integer) as depth,
    cast(priority as double) as priority,
    cast(state as varchar) as state,
    cast(reason as varchar) as reason,
    cast(queued_cycle as varchar) as queued_cycle,
    cast(due_at as timestamptz) as due_at,
    cast(attempts as integer) as attempts,
    cast(fence as bigint) as fence,
    cast(robots_version as bigint) as robots_version,
    cast(source as varchar) as source,
    cast(discovered_cycle as varchar) as discovered_cycle,
    cast(discovered_at as timestamptz) as discovered_at,
    cast(last_fetch_at as timestamptz) as last_fetch_at,
    cast(last_status as integer) as last_status,
    cast(etag as varchar) as etag,
    cast(last_modified as varchar) as last_modified,
    cast(content_hash as varchar) as content_hash,
    -- the text hash of the document the URL holds now, and its content checks so far
    cast(document_id as varchar) as document_id,
    cast(last_checked_at as timestamptz) as last_checked_at,
    cast(checks as bigint) as checks,
    cast(changes as bigint) as changes,
    cast(revisit_interval_s as double) as revisit_interval_s,
    cast(revisit_reason as varchar) as revisit_reason,
    -- estimated changes per second (Poisson, from checks at irregular intervals)
    cast(change_rate as double) as change_rate
from {{ source('lake', 'urls') }}
