-- Scope and robots: per crawl_cycle, how many discovered links (stg_links rows: outlinks,
-- redirect targets, sitemap entries, canonical hints) were blocked by robots.txt, rejected by
-- scope or cut as traps, and their shares; and of the URLs first discovered in the cycle
-- (stg_urls.discovered_cycle), how many are blocked now (state 'blocked').
-- A link's reason is the decision at its discovery: a URL seen again is 'already_known', so
-- each robots-blocked URL counts once, where it was first found.
with links as (
    select
        crawl_cycle,
        count(*) as links,
        count(*) filter (where reason = 'robots_disallowed') as robots_blocked_links,
        count(*) filter (where reason in (
            'bad_url', 'scheme_not_allowed', 'userinfo_refused', 'host_not_allowed',
            'url_rule_denied', 'max_depth', 'url_too_long', 'nofollow', 'meta_nofollow',
            'egress_refused'
        )) as scope_blocked_links,
        count(*) filter (where reason in (
            'query_variant_cap', 'path_pattern_cap', 'calendar_cap', 'path_variant_cap',
            'trap_no_novelty', 'pagination_cap', 'repeating_path'
        )) as trap_capped_links
    from {{ ref('stg_links') }}
    group by crawl_cycle
),

urls as (
    select
        discovered_cycle as crawl_cycle,
        count(*) as urls_discovered,
        count(*) filter (where state = 'blocked') as urls_blocked
    from {{ ref('stg_urls') }}
    where discovered_cycle is not null
    group by discovered_cycle
),

cycles as (
    select crawl_cycle from links
    union
    select crawl_cycle from urls
)

select
    c.crawl_cycle,
    coalesce(l.links, 0) as links,
    coalesce(l.robots_blocked_links, 0) as robots_blocked_links,
    l.robots_blocked_links / nullif(l.links, 0) as robots_blocked_share,
    coalesce(l.scope_blocked_links, 0) as scope_blocked_links,
    l.scope_blocked_links / nullif(l.links, 0) as scope_blocked_share,
    coalesce(l.trap_capped_links, 0) as trap_capped_links,
    l.trap_capped_links / nullif(l.links, 0) as trap_capped_share,
    coalesce(u.urls_discovered, 0) as urls_discovered,
    coalesce(u.urls_blocked, 0) as urls_blocked,
    u.urls_blocked / nullif(u.urls_discovered, 0) as urls_blocked_share
from cycles as c
left join links as l on l.crawl_cycle = c.crawl_cycle
left join urls as u on u.crawl_cycle = c.crawl_cycle
