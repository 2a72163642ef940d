-- Dedupe: per crawl_cycle, documents and how many distinct contents (document_id: same
-- normalized text, same id) and near-duplicate clusters (cluster_id) they hold. Labels only:
-- every document is kept. dedupe_ratio = documents / distinct document_ids (1 = no exact
-- duplicates); exact_duplicate_share = 1 - distinct_document_ids / documents, the share of
-- documents repeating a content already counted; near_duplicate_share the same for clusters.
with labels as (
    select
        crawl_cycle,
        count(*) as labelled_documents,
        count(distinct document_id) as distinct_document_ids,
        count(distinct cluster_id) as distinct_cluster_ids
    from {{ ref('stg_dedupe_clusters') }}
    group by crawl_cycle
),

docs as (
    select crawl_cycle, count(*) as documents
    from {{ ref('stg_documents') }}
    group by crawl_cycle
)

select
    d.crawl_cycle,
    d.documents,
    coalesce(l.labelled_documents, 0) as labelled_documents,
    coalesce(l.distinct_document_ids, 0) as distinct_document_ids,
    coalesce(l.distinct_cluster_ids, 0) as distinct_cluster_ids,
    d.documents / nullif(l.distinct_document_ids, 0) as dedupe_ratio,
    1 - l.distinct_document_ids / nullif(l.labelled_documents, 0) as exact_duplicate_share,
    1 - l.distinct_cluster_ids / nullif(l.labelled_documents, 0) as near_duplicate_share
from docs as d
left join labels as l on l.crawl_cycle = d.crawl_cycle
