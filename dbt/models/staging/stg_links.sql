-- Outlinks (kind = 'link') and redirect targets (kind = 'redirect') with their scope decision.
-- url is null when the href could not be normalized (reason = 'bad_url').
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(fetch_id as varchar) as fetch_id,
    cast(source_url as varchar) as source_url,
    cast(href as varchar) as href,
    cast(url as varchar) as url,
    cast(target_origin as varchar) as target_origin,
    cast(anchor as varchar) as anchor,
    cast(nofollow as boolean) as nofollow,
    cast(depth as integer) as depth,
    cast(reason as varchar) as reason,
    cast(kind as varchar) as kind,
    -- the batch fence of the run that wrote the partition (the newest run of it)
    cast(batch_fence as bigint) as batch_fence,
    -- a session-token parameter (scope.session_params with a token value) was dropped
    cast(session_id_stripped as boolean) as session_id_stripped
from {{ source('lake', 'links') }}
