"""The garbage collector during a fetch batch: the heap the batch starts with is left out of
its full collections.

By the time a batch runs, its process holds a few hundred thousand long-lived objects (the
imports of aiohttp, polars, pyarrow, SQLAlchemy, the config, the robots and scope caches). A
batch allocates and drops objects by the million, so CPython's collector runs its oldest
generation every several seconds, and each of those passes walks that whole start-up heap
again, only to find it alive. Measured on `benchmarks/crawl_throughput.py` (10,000 pages,
one process): 9 full collections took 0.70 s of the main thread's CPU, and all collections
together 1.15 s. `gc.freeze()` moves the heap of the moment into the permanent generation,
which no collection walks; what the batch itself allocates is collected as before. With it,
the same crawl's full collections took 0.22 s, all of them 0.65 s.

The youngest generation is collected every YOUNG_OBJECTS allocations instead of every 700
(the interpreter's default; 3.13 raised it to 2,000): a page's records, links and futures
are a few thousand short-lived objects, most of them gone before a collection would look
at them, so the collections that ran found little to free. Together with the freeze the
crawl's collections took 0.34 s (345 young ones instead of 1,317), and 0.44 s once the lake
write after the batch collected and froze the heap on its own (`crawl.fetch_shard`: a batch
collects only once it holds Ctrl-C).

It is undone when the batch ends (`gc.unfreeze()`), so a process that runs batch after batch
(tests, a long `atlas crawl`) never keeps a cycle alive that became garbage while it was
frozen: such a cycle waits only for the next full collection after the batch. A caller who
froze the heap already keeps it frozen, and this leaves it so.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

YOUNG_OBJECTS = 10_000  # tracked objects allocated, less those freed, between two young collections


@contextlib.contextmanager
def start_heap_frozen() -> Iterator[None]:
    """Freeze the heap as it is now for the block, then return it to the collector; the
    youngest generation is collected every YOUNG_OBJECTS allocations meanwhile."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield  # someone froze it (or turned collection off) for their own reasons: theirs
        return
    # garbage of before the batch is collected now rather than kept for the batch's length
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
