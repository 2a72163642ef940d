-- Recrawl: per crawl_cycle, page fetches, revisits (page fetches of a URL fetched in an
-- earlier cycle), conditional requests (validators sent) and their 304 answers, 200s whose
-- content had not changed, and the documents revisits produced (a changed page).
-- not_modified_rate = 304s / conditional requests; changed_page_yield = revisit documents /
-- revisits. Both are null when their denominator is 0.
with pages as (
    select
        f.crawl_cycle,
        f.fetch_id,
        f.url,
        f.status,
        f.reason,
        coalesce(f.conditional, false) as conditional,
        exists (
            select 1 from {{ ref('stg_fetches') }} as earlier
            where earlier.kind = 'page'
              and earlier.url = f.url
              and earlier.crawl_cycle < f.crawl_cycle
        ) as revisit
    from {{ ref('stg_fetches') }} as f
    where f.kind = 'page'
),

documented as (
    select
        p.*,
        d.fetch_id is not null as has_document
    from pages as p
    left join {{ ref('stg_documents') }} as d on d.fetch_id = p.fetch_id
),

by_cycle as (
    select
        crawl_cycle,
        count(*) as page_fetches,
        count(*) filter (where revisit) as revisits,
        count(*) filter (where conditional) as conditional_requests,
        count(*) filter (where conditional and status = 304) as not_modified,
        count(*) filter (where reason = 'content_unchanged') as content_unchanged,
        count(*) filter (where revisit and has_document) as revisit_documents
    from documented
    group by crawl_cycle
)

select
    *,
    not_modified / nullif(conditional_requests, 0) as not_modified_rate,
    revisit_documents / nullif(revisits, 0) as changed_page_yield
from by_cycle
