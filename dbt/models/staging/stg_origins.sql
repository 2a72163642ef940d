-- One row per origin (the grain of lake.origins): its configured gap and the adaptive extra,
-- fairness class, robots standing, validator trust and whether an operator paused it.
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(origin as varchar) as origin,
    cast(registrable_domain as varchar) as registrable_domain,
    cast(fair_class as varchar) as fair_class,
    cast(bucket as varchar) as bucket,
    cast(min_gap_s as double) as min_gap_s,
    cast(adapt_gap_s as double) as adapt_gap_s,
    cast(max_in_flight as integer) as max_in_flight,
    cast(backoff_until as timestamptz) as backoff_until,
    cast(robots_status as varchar) as robots_status,
    cast(robots_version as bigint) as robots_version,
    cast(robots_fetched_at as timestamptz) as robots_fetched_at,
    cast(validators_trusted as boolean) as validators_trusted,
    cast(validator_checks as bigint) as validator_checks,
    cast(validator_misses as bigint) as validator_misses,
    cast(paused as boolean) as paused
from {{ source('lake', 'origins') }}
