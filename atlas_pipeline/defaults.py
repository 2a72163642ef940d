"""Documented defaults for every crawl knob; config.py builds the typed config from these."""

from __future__ import annotations

USER_AGENT = "AtlasBot/1.0 (+https://atlas.example.test/bot)"
DATA_DIR = "./atlas_data"  # lake, bodies, SQLite files; relative to the config file's folder
SHARDS = 4  # origin shards per cycle; one Dagster partition per (cycle, shard)

# Politeness (per origin unless stated)
MIN_GAP_S = 1.0  # seconds between request *starts* to one origin
MAX_IN_FLIGHT = 1  # concurrent requests to one origin
GLOBAL_CONCURRENCY = 64  # concurrent requests of one fetch batch, all origins together
GAP_GUARD_S = 0.01  # seconds added to a non-zero gap for claim-to-wire latency
START_SLACK_S = 0.005  # a request leaving later than this after its claim pushes the clock
ROBOTS_POLL_S = 0.5  # a subrequest waiting on another run's robots.txt fetch looks this often
SEND_MARGIN_S = 1.0  # a request waiting at the send gate leaves at least this before its lease ends
# (below GAP_GUARD_S, so a request late by less is still covered by the guard)
CRAWL_DELAY_CAP_S = 30.0  # a robots Crawl-delay above this is capped
CLASS_QUOTA = 0.25  # no fairness class above a quarter of attempts while others wait
CLASS_WINDOW_S = 60.0  # half-life of the attempt counts behind the class quota
STARVATION_BOUND_S = 30.0  # an origin waiting longer is served next, quota or not
AGING_PER_HOUR = 0.01  # priority gained per hour queued (depth priorities step by 0.1)
ADAPTIVE_MAX_GAP_S = 60.0  # an origin's adaptive gap widens on errors up to this
OVERLOAD_SHARE = 0.5  # recent 5xx share from which a repeated 5xx means the origin struggles
RECOVER_STEPS = 10  # healthy answers that undo any adaptive widening

# Scope
MAX_DEPTH = 8  # link hops from a seed
MAX_PAGES_PER_ORIGIN = 1000  # URLs admitted to one cycle's queue per origin
MAX_URL_LENGTH = 2048  # characters; longer URLs are rejected

# Limits
MAX_BODY_BYTES = 5 * 1024 * 1024  # 5 MiB of *decompressed* body
TOTAL_TIMEOUT_S = 30.0  # whole request, connect to last byte
CONNECT_TIMEOUT_S = 10.0  # TCP (and TLS) connect
READ_TIMEOUT_S = 15.0  # longest silence between two reads of one response
MAX_HEADER_BYTES = 64 * 1024  # all response header lines together
MAX_REDIRECTS = 5  # hops followed from the first URL of a chain
PARSER_CPU_S = 10.0  # CPU seconds one document may cost its parser process
PARSER_MEMORY_MB = 1024  # address space a parser may map beyond its warm size (~850 MiB)
LEASE_MARGIN_S = 30.0  # lease = total timeout + this, so no request outlives its lease
BATCH_MAX_IDLE_S = 120.0  # a batch stops when its next eligible origin is further away than this

# Robots
ROBOTS_CACHE_S = 24 * 3600.0  # a 2xx robots.txt is trusted this long
ROBOTS_MAX_BYTES = 500 * 1024  # RFC 9309 minimum a parser must read
ROBOTS_UNREACHABLE_BACKOFF_S = 600.0  # origin backoff after robots 5xx / network failure
ROBOTS_STALE_GRACE_S = 3 * 24 * 3600.0  # last good copy may stand in this long when unreachable
ROBOTS_429_BACKOFF_S = 300.0  # origin backoff after robots 429 without Retry-After

# Retries
MAX_ATTEMPTS = 3  # fetch attempts per URL per cycle before it becomes terminal
RETRY_BACKOFF_S = 60.0  # base delay before a failed URL is eligible again
INTERRUPT_GRACE_S = 3.0  # after Ctrl-C, requests in flight get this long to finish
STORE_OUTAGE_S = 300.0  # a batch waits this long for an unreachable coordination store

# Revisit
REVISIT_INTERVAL_S = 24 * 3600.0  # first revisit, before a URL has a change history
MIN_REVISIT_S = 600.0  # seed 000 ch. 13: intervals are bounded 10 minutes ...
MAX_REVISIT_S = 30 * 24 * 3600.0  # ... to 30 days
REVISIT_JITTER = 0.1  # +-10 %: pages fetched together do not all fall due together
REVISIT_MAX_GROWTH = 2.0  # an interval at most doubles per quiet check
CHANGE_HISTORY = 32  # content checks kept per URL for the change-rate estimate
DISCOVERY_SHARE = 0.3  # of each origin's cycle budget, kept for never-fetched URLs
UNTRUSTED_AFTER = 3  # misleading validator answers before an origin's validators are ignored
FRESHNESS_CLASSES = {  # seed 001 ch. 3: important pages within a day, low-value within a month
    "important": {"min_priority": 0.8, "target_s": 24 * 3600.0},
    "normal": {"min_priority": 0.3, "target_s": 7 * 24 * 3600.0},
    "low": {"min_priority": 0.0, "target_s": 30 * 24 * 3600.0},
}
MAX_STALE_SHARE = 0.1  # a class fails its freshness check above this share of stale URLs
TABLE_MAX_AGE_S = 2 * 24 * 3600.0  # a lake table not written for this long fails its check
CYCLE_CRON = "0 */6 * * *"  # the crawl schedule's cadence: a new cycle every six hours

# Extraction
EXTRACTION_VERSION = "trafilatura-2.3.1/v1"
# Queued parse jobs per pool worker before fetching pauses. A backlog that limits the claim
# is refilled by halves (backlog.claim_room), so this also sets how many URLs a claim takes
# when extraction is the bottleneck. benchmarks/crawl_throughput.py (10k pages, 2 workers),
# back to back: 4 took 4.2 URLs a claim (2,379 claims, 7.1 s of store CPU, 0.74x the plain
# loop's pages/s); 8 took 8.2 (1,212 claims, 5.6 s, 0.77x); 16 (with the commit window
# below at 0.1 s) took 16.2 (615 claims, 4.2 s). Memory: at most workers x this many bodies
# of up to limits.max_body_bytes wait here (peak RSS of the run above: 291 MiB; runs at 8
# the same day: 290 to 396 MiB).
PARSE_BACKLOG_PER_WORKER = 16
# Results are committed in groups: when this many wait, or the oldest has waited this long
# (one discovery and one transaction per group, not per page; the slot went back already,
# so a wider window costs no throughput; a crash loses at most the window's results, whose
# URLs the sweeper hands out again). In the run above, 20 ms and 16 took 2,347 commit
# transactions (4.2 results each); 0.1 s and 64 took 574 (17.3), and the store thread's CPU
# fell from 5.8 to 5.0 s with this change alone (4.2 s with the backlog at 16).
COMMIT_GROUP = 64
COMMIT_WINDOW_S = 0.1
# While the parse backlog keeps a batch from claiming, the origin slots of finished requests
# are given back in a transaction of their own once the oldest has waited this long (a
# claim gives them back in its own transaction sooner). Holding a slot a little longer only
# ever delays a request to its origin.
GIVE_BACK_WINDOW_S = 0.1
BODY_THREADS = 4  # threads per batch for body-store reads and writes (disk or object store)

# URL identity
TRACKING_PARAMS = (
    "gclid",
    "fbclid",
    "msclkid",
    "dclid",
    "yclid",
    "igshid",
    "mc_cid",
    "mc_eid",
    "_ga",
)
# Query keys that may hold a session id; one is dropped only when its value also looks like a
# session token (traps.looks_like_session_token). No ordinary word here: `s` is WordPress's search.
SESSION_PARAMS = ("sid", "sessionid", "session_id", "jsessionid", "phpsessid", "aspsessionid",
                  "cfid", "cftoken", "zenid")  # fmt: skip
PAGE_PARAMS = ("page", "p", "pg", "paged", "pagenum", "offset", "start")
MAX_PAGE_NUMBER = 50  # deeper pagination is cut (pagination_cap)
MAX_REPEATED_SEGMENTS = 2  # /a/a/ is fine, /a/a/a/ is a relative link feeding on itself
MAX_QUERY_VARIANTS = 100  # worded query strings per path and key set (facets, searches)
MAX_PATTERN_URLS = 5000  # URLs per origin that differ only in their digits
MAX_CALENDAR_URLS = 36  # ... when those digits are dates: three years of months
# filters added and removed in any order make each subset and order of keys a key set of its
# own, so query variants are also capped per path across all key sets
MAX_PATH_VARIANTS = 200
NOVELTY_WINDOW = 8  # fetched variants of a path that bring nothing new before they stop
INDEX_BATCH_SIZE = 100  # events per indexer request
DEDUPE_THRESHOLD = 0.8  # MinHash-estimated Jaccard for a near-duplicate candidate
DEDUPE_NUM_PERM = 128
DEDUPE_SHINGLE_WORDS = 5
DEDUPE_VOLATILE_WORDS = 12  # a differing line this short is a box (related links), not the story
SITEMAP_MAX_BYTES = 50 * 1024 * 1024  # the protocol's own limit for one sitemap, uncompressed
TRACKING_PREFIXES = ("utm_",)  # any query key starting with these is dropped

# DNS cache of the egress gate
DNS_TTL_S = 60.0  # seconds an answer is trusted when the lookup reports no TTL (getaddrinfo)
DNS_MAX_TTL_S = 3600.0  # longer TTLs are cut to this, so a moved host is seen within an hour
DNS_NEGATIVE_TTL_S = 5.0  # seconds a refusal (failure or non-public answer) is remembered
DNS_CACHE_ENTRIES = 65_536  # names cached; the oldest entry goes first

# Retention per data class (seed 000 ch. 15: bodies 5 days, documents 30 days)
BODY_RETENTION_DAYS = 5.0  # raw bodies of fetches older than this go, unless still current
DOCUMENT_RETENTION_DAYS = 30.0  # superseded document versions older than this go
RETENTION_CRON = "30 3 * * *"  # the retention job runs daily at 03:30
