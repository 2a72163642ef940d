-- Politeness: per (crawl_cycle, origin), how fast the origin was asked against its limit.
-- Every request counts (pages, robots.txt, sitemaps). The rate is the mean start-to-start
-- rate, (requests - 1) / span between the first and the last request start, so it is <= the
-- limit exactly when the mean gap is >= min_gap_s. The gaps come from stg_origins (the origin
-- as it stands after the latest cycle); the limit is null for an unpaced origin (min_gap_s 0).
with requests as (
    select
        crawl_cycle,
        origin,
        count(*) as requests,
        count(*) filter (where kind = 'page') as page_requests,
        count(*) filter (where status = 429) as http_429,
        min(started_at) as first_request_at,
        max(started_at) as last_request_at
    from {{ ref('stg_fetches') }}
    group by crawl_cycle, origin
),

spans as (
    select
        *,
        (epoch_us(last_request_at) - epoch_us(first_request_at)) / 1e6 as span_s
    from requests
),

rated as (
    select
        s.*,
        case when s.requests > 1 and s.span_s > 0
            then (s.requests - 1) / s.span_s end as requests_per_s,
        o.min_gap_s,
        o.adapt_gap_s,
        o.min_gap_s + coalesce(o.adapt_gap_s, 0) as effective_gap_s
    from spans as s
    left join {{ ref('stg_origins') }} as o on o.origin = s.origin
)

select
    crawl_cycle,
    origin,
    requests,
    page_requests,
    first_request_at,
    last_request_at,
    span_s,
    requests_per_s,
    min_gap_s,
    adapt_gap_s,
    effective_gap_s,
    case when min_gap_s > 0 then 1.0 / min_gap_s end as limit_per_s,
    case when effective_gap_s > 0 then 1.0 / effective_gap_s end as adaptive_limit_per_s,
    case when min_gap_s > 0 then requests_per_s * min_gap_s end as rate_vs_limit,
    http_429,
    http_429 / requests as share_429
from rated
