-- Freshness: per (crawl_cycle, freshness_class) of stg_recrawl_schedule, the checked URLs,
-- how many were stale (unchecked past the class target) when the cycle's schedule was
-- written, their staleness and the class target in hours, and the mean overshoot past it.
select
    crawl_cycle,
    freshness_class,
    count(*) as urls,
    count(*) filter (where stale) as stale_urls,
    count(*) filter (where stale) / count(*) as stale_share,
    avg(staleness_s) / 3600.0 as mean_staleness_h,
    max(staleness_s) / 3600.0 as max_staleness_h,
    max(target_s) / 3600.0 as target_h,
    avg(greatest(staleness_s - target_s, 0)) / 3600.0 as mean_gap_h
from {{ ref('stg_recrawl_schedule') }}
group by crawl_cycle, freshness_class
