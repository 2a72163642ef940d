-- Backlog: per crawl_cycle, the oldest eligible URL of the cycle's frontier (earliest
-- discovered_at; ties to the higher priority, then the URL), its age when selected, how many
-- eligible URLs the frontier held, and where the URL stands now (stg_urls.state).
with eligible as (
    select
        f.crawl_cycle,
        f.origin_shard,
        f.url,
        f.origin,
        f.priority,
        u.discovered_at,
        f.selected_at,
        (epoch_us(f.selected_at) - epoch_us(u.discovered_at)) / 1e6 as age_s,
        u.state as current_state,
        count(*) over (partition by f.crawl_cycle) as eligible_urls,
        row_number() over (
            partition by f.crawl_cycle
            order by u.discovered_at nulls last, f.priority desc, f.url
        ) as age_rank
    from {{ ref('stg_frontier') }} as f
    left join {{ ref('stg_urls') }} as u on u.url = f.url
    where f.state = 'eligible'
)

select
    crawl_cycle,
    origin_shard,
    url,
    origin,
    priority,
    discovered_at,
    selected_at,
    age_s,
    current_state,
    eligible_urls
from eligible
where age_rank = 1
