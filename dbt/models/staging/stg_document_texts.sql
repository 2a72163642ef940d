-- Extracted text, one row per document id (the text hash) however many URLs hold it; join
-- stg_documents.text_hash = document_id for a URL's text.
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(document_id as varchar) as document_id,
    cast(text as varchar) as text,
    cast(text_chars as bigint) as text_chars,
    cast(extraction_version as varchar) as extraction_version
from {{ source('lake', 'document_texts') }}
