-- HTTP fetches, one row per fetch_id. kind = 'page' rows carry a Reason code;
-- kind = 'robots' rows carry a RobotsStatus (parsed / unavailable / unreachable / throttled).
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(fetch_id as varchar) as fetch_id,
    cast(kind as varchar) as kind,
    cast(url as varchar) as url,
    cast(origin as varchar) as origin,
    cast(depth as integer) as depth,
    cast(status as integer) as status,
    cast(reason as varchar) as reason,
    cast(content_type as varchar) as content_type,
    cast(bytes as bigint) as bytes,
    cast(started_at as timestamptz) as started_at,
    cast(elapsed_s as double) as elapsed_s,
    cast(etag as varchar) as etag,
    cast(last_modified as varchar) as last_modified,
    cast(location as varchar) as location,
    cast(final_url as varchar) as final_url,
    cast(lease_id as varchar) as lease_id,
    cast(fence as bigint) as fence,
    cast(attempt as integer) as attempt,
    cast(robots_version as bigint) as robots_version,
    cast(error as varchar) as error,
    cast(body_key as varchar) as body_key,
    -- the first URL of the redirect chain that led here, and the chain itself (hops in order)
    cast(original_url as varchar) as original_url,
    cast(redirect_chain as varchar[]) as redirect_chain,
    -- the batch fence of the run that wrote the partition (the newest run of it)
    cast(batch_fence as bigint) as batch_fence,
    -- whether validators (If-None-Match / If-Modified-Since) were sent
    cast(conditional as boolean) as conditional
from {{ source('lake', 'fetches') }}
