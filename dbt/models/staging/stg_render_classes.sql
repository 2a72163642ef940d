-- One row per origin and page class (the grain of lake.render_classes): the render lane's
-- decision (sampling, render or plain) and the word counts it was made from.
select
    cast(crawl_cycle as varchar) as crawl_cycle,
    cast(origin_shard as varchar) as origin_shard,
    cast(origin as varchar) as origin,
    cast(page_class as varchar) as page_class,
    cast(state as varchar) as state,
    cast(samples as integer) as samples,
    cast(raw_words as bigint) as raw_words,
    cast(rendered_words as bigint) as rendered_words,
    cast(share as double) as share,
    cast(decided_at as timestamptz) as decided_at,
    cast(updated_at as timestamptz) as updated_at
from {{ source('lake', 'render_classes') }}
