-- Parse yield: per (crawl_cycle, origin), HTML page answers with a body (status 200) and the
-- documents they gave. A 200 whose content matched the last check (content_unchanged) is not
-- parsed by design, so it leaves the denominator: parse_yield = documents_with_text /
-- parsed_fetches, where parsed_fetches = html_200_fetches - content_unchanged.
with html as (
    select
        crawl_cycle,
        origin,
        count(*) as html_200_fetches,
        count(*) filter (where reason = 'content_unchanged') as content_unchanged,
        count(*) filter (where reason in (
            'parse_failed', 'parse_timeout', 'parse_memory', 'parse_crashed', 'binary_content'
        )) as parse_failures
    from {{ ref('stg_fetches') }}
    where kind = 'page'
      and status = 200
      and (lower(content_type) like 'text/html%'
           or lower(content_type) like 'application/xhtml+xml%')
    group by crawl_cycle, origin
),

docs as (
    select
        crawl_cycle,
        origin,
        count(*) as documents,
        count(*) filter (where coalesce(text_chars, 0) > 0) as documents_with_text
    from {{ ref('stg_documents') }}
    group by crawl_cycle, origin
),

joined as (
    select
        coalesce(h.crawl_cycle, d.crawl_cycle) as crawl_cycle,
        coalesce(h.origin, d.origin) as origin,
        coalesce(h.html_200_fetches, 0) as html_200_fetches,
        coalesce(h.content_unchanged, 0) as content_unchanged,
        coalesce(h.html_200_fetches, 0) - coalesce(h.content_unchanged, 0) as parsed_fetches,
        coalesce(h.parse_failures, 0) as parse_failures,
        coalesce(d.documents, 0) as documents,
        coalesce(d.documents_with_text, 0) as documents_with_text
    from html as h
    full outer join docs as d on d.crawl_cycle = h.crawl_cycle and d.origin = h.origin
)

select
    *,
    documents_with_text / nullif(parsed_fetches, 0) as parse_yield
from joined
