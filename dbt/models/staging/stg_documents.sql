-- Extracted documents, one row per page fetch that produced one.
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(fetch_id as varchar) as fetch_id,
    cast(url as varchar) as url,
    cast(origin as varchar) as origin,
    cast(title as varchar) as title,
    cast(author as varchar) as author,
    cast(published as varchar) as published,
    cast(description as varchar) as description,
    cast(language as varchar) as language,
    cast(text_hash as varchar) as text_hash,
    cast(text_chars as bigint) as text_chars,
    cast(canonical_hint as varchar) as canonical_hint,
    cast(charset as varchar) as charset,
    cast(body_key as varchar) as body_key,
    cast(links_out as integer) as links_out,
    cast(extraction_version as varchar) as extraction_version,
    cast(fetched_at as timestamptz) as fetched_at,
    -- the batch fence of the run that wrote the partition (the newest run of it)
    cast(batch_fence as bigint) as batch_fence,
    -- why the document was kept out of the index (null: indexed), e.g. noindex, and the
    -- document id of an earlier upsert for the URL that its delete event withdrew
    cast(index_reason as varchar) as index_reason,
    cast(withdrawn_document_id as varchar) as withdrawn_document_id,
    -- whether the text came from the page rendered in headless Chromium (render_needed, ...)
    cast(render_reason as varchar) as render_reason
from {{ source('lake', 'documents') }}
