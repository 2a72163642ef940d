-- One row per document (URL fetch): document_id is the digest of its normalized text (same
-- content, same id), cluster_id its near-duplicate label; threshold and method say how.
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(url as varchar) as url,
    cast(fetch_id as varchar) as fetch_id,
    cast(document_id as varchar) as document_id,
    cast(cluster_id as varchar) as cluster_id,
    cast(similarity as double) as similarity,
    cast(threshold as double) as threshold,
    cast(method as varchar) as method,
    -- the page's rel=canonical, and whether the named page's content confirms it (null: the
    -- named page is not among this partition's documents)
    cast(canonical_url as varchar) as canonical_url,
    cast(canonical_confirmed as boolean) as canonical_confirmed
from {{ source('lake', 'dedupe_clusters') }}
