-- One row per control-plane answer about an origin of the partition's shard (the grain of
-- lake.ownership): which region asked, what it was given (grant, renew, takeover, refuse,
-- reject_stale, release) and under which token. Empty for a single-region crawl.
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(seq as bigint) as seq,
    cast(answered_at as timestamptz) as answered_at,
    cast(origin as varchar) as origin,
    cast(region as varchar) as region,
    cast(action as varchar) as action,
    cast(asked_token as bigint) as asked_token,
    cast(token as bigint) as token,
    cast(lease_until as timestamptz) as lease_until,
    cast(holder as varchar) as holder,
    cast(detail as varchar) as detail,
    cast(reported_by as varchar) as reported_by
from {{ source('lake', 'ownership') }}
