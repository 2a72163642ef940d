-- Fairness: per (crawl_cycle, fair_class), the class's fetches and their share of all fetches
-- of the cycle. Every request counts (pages, robots.txt, sitemaps); the class is the origin's
-- fair_class in stg_origins ('unknown' for an origin missing there).
with fetches as (
    select
        f.crawl_cycle,
        coalesce(o.fair_class, 'unknown') as fair_class,
        f.origin,
        f.kind
    from {{ ref('stg_fetches') }} as f
    left join {{ ref('stg_origins') }} as o on o.origin = f.origin
),

by_class as (
    select
        crawl_cycle,
        fair_class,
        count(distinct origin) as origins,
        count(*) as fetches,
        count(*) filter (where kind = 'page') as page_fetches
    from fetches
    group by crawl_cycle, fair_class
)

select
    crawl_cycle,
    fair_class,
    origins,
    fetches,
    page_fetches,
    cast(sum(fetches) over (partition by crawl_cycle) as bigint) as cycle_fetches,
    fetches / sum(fetches) over (partition by crawl_cycle) as fetch_share,
    page_fetches / nullif(sum(page_fetches) over (partition by crawl_cycle), 0) as page_fetch_share
from by_class
