-- The indexer outbox: one event per document; event_id is deterministic (URL, document,
-- extraction version, action), so a re-delivered event is a duplicate by id.
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(event_id as varchar) as event_id,
    cast(action as varchar) as action,
    cast(url as varchar) as url,
    cast(document_id as varchar) as document_id,
    cast(fetch_id as varchar) as fetch_id,
    cast(title as varchar) as title,
    cast(language as varchar) as language,
    cast(extraction_version as varchar) as extraction_version,
    cast(fetched_at as timestamptz) as fetched_at,
    -- the batch fence of the run that wrote the partition (the newest run of it)
    cast(batch_fence as bigint) as batch_fence,
    -- why a delete was emitted (noindex); null for an upsert
    cast(reason as varchar) as reason
from {{ source('lake', 'index_ready') }}
