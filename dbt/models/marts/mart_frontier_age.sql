-- Backlog: per (crawl_cycle, priority_bucket), the URLs the frontier selected for the cycle
-- and how long they had waited when selected (selected_at - discovered_at, discovered_at from
-- stg_urls). Buckets follow the default freshness classes: high >= 0.8, normal >= 0.3, low.
with frontier as (
    select
        f.crawl_cycle,
        f.url,
        f.priority,
        case
            when f.priority >= 0.8 then 'high'
            when f.priority >= 0.3 then 'normal'
            else 'low'
        end as priority_bucket,
        (epoch_us(f.selected_at) - epoch_us(u.discovered_at)) / 1e6 as age_s
    from {{ ref('stg_frontier') }} as f
    left join {{ ref('stg_urls') }} as u on u.url = f.url
)

select
    crawl_cycle,
    priority_bucket,
    count(*) as queued_urls,
    min(priority) as min_priority,
    max(priority) as max_priority,
    avg(age_s) as mean_age_s,
    max(age_s) as max_age_s
from frontier
group by crawl_cycle, priority_bucket
