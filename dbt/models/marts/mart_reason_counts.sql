-- Reason codes: per (crawl_cycle, source_table, reason), how many rows carry the reason:
-- links (the scope decision of each discovered link), fetches (what each page or sitemap
-- request established; robots.txt fetches carry a RobotsStatus instead and are left out) and
-- urls (where each URL of the catalogue stands, under the cycle that last wrote it).
-- share = count / all rows of that table in the cycle.
with reasons as (
    select crawl_cycle, 'links' as source_table, reason from {{ ref('stg_links') }}
    union all
    select crawl_cycle, 'fetches' as source_table, reason
    from {{ ref('stg_fetches') }}
    where kind <> 'robots'
    union all
    select crawl_cycle, 'urls' as source_table, reason
    from {{ ref('stg_urls') }}
    where reason is not null
),

counted as (
    select crawl_cycle, source_table, reason, count(*) as n
    from reasons
    group by crawl_cycle, source_table, reason
)

select
    crawl_cycle,
    source_table,
    reason,
    n,
    n / sum(n) over (partition by crawl_cycle, source_table) as share
from counted
