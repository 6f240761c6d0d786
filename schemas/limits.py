"""Every number the contract fixes, named once.

Sources: SPEC.md section 8 (the contract), DECISIONS.md (where the spec is silent) and, for page
sizes and rate limits, the reference buckets that DECISIONS.md adopts (anchor-notes section 9).
A value marked "reference" is the public reference implementation's choice, kept because the
spec is silent and nothing better is known.

Conventions: every duration is an ``int`` of seconds with a ``_SEC`` suffix (the unit of the
API's ``*Sec`` fields, ``Retry-After`` and SQL intervals), or ``_DAYS`` where the API speaks in
days. Lifetimes the server adds to a clock (``expires_at = now + ...``, Temporal timers) also get a
``timedelta`` twin named ``*_LIFETIME`` / ``*_WAIT``, derived from the int at the end of this
module so the two cannot drift. Sizes say their unit (``_CHARS``, ``_BYTES``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Final, NamedTuple

MINUTE_SEC: Final = 60
HOUR_SEC: Final = 60 * MINUTE_SEC
DAY_SEC: Final = 24 * HOUR_SEC
MIB: Final = 1024 * 1024

# --- errors (STYLE "Errors", habit 6) -----------------------------------------------------------
ERROR_DETAIL_MAX_CHARS: Final = 8000  # problem `detail` is truncated to this

# --- diary entries (SPEC 2.1, 8; DECISIONS "Memory") ---------------------------------------------
ENTRY_TITLE_MAX_CHARS: Final = 255  # varchar(255)
ENTRY_CONTENT_MIN_CHARS: Final = 1  # an empty entry has nothing to embed or sign
ENTRY_CONTENT_MAX_CHARS: Final = 10_000  # spec's limit (the reference allows 100 000)
ENTRY_IMPORTANCE_MIN: Final = 1
ENTRY_IMPORTANCE_MAX: Final = 10
ENTRY_IMPORTANCE_DEFAULT: Final = 5  # the middle, so unrated entries neither win nor lose
ENTRY_TAGS_MAX: Final = 20  # tags per entry
ENTRY_TAG_MAX_CHARS: Final = 128  # characters per tag
SEARCH_QUERY_MAX_CHARS: Final = 500  # reference; bounds the text we embed per search

# --- embeddings and hybrid search (DECISIONS "Memory") -----------------------------------------
EMBEDDING_DIMENSIONS: Final = 384  # all-MiniLM-L6-v2 output, pgvector column width
EMBEDDING_MAX_TOKENS: Final = 256  # truncation; overrides tokenizer.json's 128
EMBEDDING_BATCH_TEXTS: Final = 16  # texts of similar length share one batch of this size
# Vector candidates farther than this are noise. Measured on the tuning half of bench/quality.py
# (recall@10 with identifier links): 0.6 → 0.645, 0.7 → 0.656, 0.8 → 0.675, 0.9 and 1.0 → 0.675:
# MiniLM puts a paraphrase's answer at 0.6-0.8 from the query as often as below 0.6.
SEARCH_MAX_COSINE_DISTANCE: Final = 0.8
# The relevance floor (schemas/ranking.py, `fuse`): a query without a full-text match is answered
# only if a vector candidate is within this distance, else nothing is returned. Measured on the
# tuning half of bench/quality.py with 20 queries whose answer is in no diary
# (bench/results/quality.json, ranking_sweep.floor): the best recall@10 that answers at most 10 %
# of them. 0.675: recall@10 0.679, 5 % answered; 0.7: the same recall, 10 %; 0.75: 0.693, 30 %;
# no floor (0.8, the cut-off): 0.697, 55 %.
SEARCH_ANSWER_MAX_DISTANCE: Final = 0.675
# An injection-flagged entry keeps this share of its relevance (DECISIONS, turn 4): it ranks
# below unflagged entries of similar relevance. Measured like the floor (ranking_sweep.
# flagged_factor): a flagged entry in the first five of 4 % of the tuning queries at 1.0, none
# from 0.8 down to 0.3, at the same recall and nDCG; 0.5 leaves a margin for closer text.
SEARCH_FLAGGED_RELEVANCE_FACTOR: Final = 0.5
SEARCH_CANDIDATE_FACTOR: Final = 2  # each arm fetches top 2 x limit before fusion
SEARCH_RRF_K: Final = 60  # reciprocal-rank-fusion constant, the usual value
# Weights of the two arms in the fusion, tuned on the tuning half of bench/quality.py (nDCG@10
# 0.536 with equal weights → 0.557): a full-text match needs every word of the query, so it is
# the stronger evidence and wins a tie against a vector-only candidate of the same rank. Any
# vector weight from 0.2 to 0.4 with k from 10 to 100 scored within 0.002 of the best. Re-swept
# with identifier links and successor inheritance (bench/results/quality.json, fusion_sweep):
# these constants 0.619, the best cell (k 5, vector 0.2) 0.626, the same recall@10: kept.
SEARCH_RRF_WEIGHT_VECTOR: Final = 0.4
SEARCH_RRF_WEIGHT_FULLTEXT: Final = 0.6
# Identifier links (infra/repos/search.py, `linked_entries`): the best fused candidate's rare
# identifiers (a lexeme with three digits in a row: a ticket, error code, run or commit, found in
# at most SEARCH_LINK_MAX_SHARED entries of the scope) bring in the entries that share them, at
# SEARCH_LINK_RELEVANCE × its relevance. Tuned on the tuning half (cut-off 0.8): recall@10 0.592
# without links, 0.675 with 1 seed, 0.671 with 2 or 3; caps from 3 to 20 score the same; factor
# 0.9 scores a little above 0.999 on nDCG (a link stays below the entry it came from).
SEARCH_LINK_SEEDS: Final = 1
SEARCH_LINK_MAX_SHARED: Final = 10
SEARCH_LINK_RELEVANCE: Final = 0.9
EMBED_REQUEST_MAX_TEXTS: Final = 64  # texts per `embedding.embed_passages` call (~0.5 MiB out)
# Micro-batching of concurrent embedding calls in one worker: the first call of a burst waits
# this long for neighbours (calls arriving while a run is in progress join the next run without
# waiting), and one ONNX run takes at most this many texts.
EMBEDDING_MICROBATCH_WINDOW_MS: Final = 3
EMBEDDING_MICROBATCH_MAX_TEXTS: Final = 64
SEARCH_WEIGHT_RELEVANCE_DEFAULT: Final = 1.0  # recency and importance default to 0 (reference)
SEARCH_RECENCY_DECAY_PER_HOUR: Final = 0.99  # recency = 0.99 ** hours since last access
# Plan of the vector arm (measured in bench/memory.py): a scope of at most this many entries is
# searched exactly (an index-only scan of its vectors, ~1.5 µs a row); a larger one through the
# HNSW index with `hnsw.ef_search` raised so that, after pgvector drops the rows outside the
# scope, enough candidates remain: ef = margin × wanted / (scope share of the table), clamped.
SEARCH_EXACT_SCOPE_MAX_ROWS: Final = 10_000
SEARCH_HNSW_EF_MIN: Final = 100
SEARCH_HNSW_EF_MAX: Final = 1000  # pgvector's own ceiling for hnsw.ef_search
SEARCH_HNSW_EF_MARGIN: Final = 2.0
# pgvector 0.8's iterative scan (`hnsw.iterative_scan = relaxed_order`) for a large scope too
# thin a share of the table for the ef above: it keeps scanning until enough rows pass the
# filters. At this ef, a team's 20 000 of 1 000 000 entries: recall@10 0.978, p50 x2.4 faster
# than exact search over the scope (docs/search-scale.md).
SEARCH_HNSW_ITERATIVE_EF: Final = 200
PUBLIC_SEARCH_QUERY_MIN_CHARS: Final = 2  # reference bounds of `q` on GET /public/feed/search
PUBLIC_SEARCH_QUERY_MAX_CHARS: Final = 200
PUBLIC_CACHE_MAX_AGE_SEC: Final = 60  # reference: `Cache-Control: public, max-age=60` on the feed

# --- compression (DECISIONS "Memory") -----------------------------------------------------------
WORDS_PER_TOKEN: Final = 0.75  # tokens = ceil(words / 0.75)
SUMMARY_SENTENCE_RATIO: Final = 0.3  # `summary` keeps the best 30 % of sentences
KEYWORDS_MAX_TOKENS: Final = 30  # `keywords` keeps distinctive words up to this budget

# --- prompt-injection scanner (DECISIONS "Memory") ----------------------------------------------
INJECTION_THRESHOLD: Final = 0.7  # a threat counts at or above this severity (reference preset)
# A title, its newline and the largest entry; anything longer is flagged as an evasion.
INJECTION_SCAN_MAX_CHARS: Final = ENTRY_TITLE_MAX_CHARS + 1 + ENTRY_CONTENT_MAX_CHARS
INJECTION_MATCH_MAX_CHARS: Final = 100  # each stored threat quotes at most this much text
INJECTION_MAX_THREATS: Final = 20  # threats stored per entry and listed in a pack 409

# --- identity and authentication (SPEC 2.3, 4.1, 8; DECISIONS "Identity") -----------------------
ED25519_PUBLIC_KEY_BYTES: Final = 32  # raw key, not an SPKI wrapper
ED25519_SIGNATURE_BYTES: Final = 64
SIGNATURE_B64_MAX_CHARS: Final = 88  # base64 of 64 bytes with padding
VOUCHER_TTL_SEC: Final = 24 * HOUR_SEC  # voucher expires 24 h after issue
MAX_OPEN_VOUCHERS_PER_ISSUER: Final = 5  # unredeemed and unexpired, per issuing agent
RECOVERY_CHALLENGE_TTL_SEC: Final = 5 * MINUTE_SEC  # challenge age limit at verify
RECOVERY_CHALLENGE_MAX_CHARS: Final = 500  # reference; bounds work before the HMAC check
RECOVERY_CODE_TTL_SEC: Final = 15 * MINUTE_SEC  # one-time recovery code lifetime
RECOVERY_CODE_MAX_TRIES: Final = 5  # wrong codes before the flow is burned
ACCESS_TOKEN_TTL_SEC: Final = HOUR_SEC  # OAuth2 client_credentials JWT; no refresh token
# The browser OAuth connector of the MCP server (humans; DECISIONS "Tool-protocol server")
CONNECTOR_REQUEST_TTL_SEC: Final = 10 * MINUTE_SEC  # a signed authorize request, login to consent
CONNECTOR_CODE_TTL_SEC: Final = 5 * MINUTE_SEC  # an authorization code (RFC 6749 10.5: short)
CONNECTOR_ACCESS_TTL_SEC: Final = HOUR_SEC  # an MCP-audience access token
CONNECTOR_REFRESH_TTL_SEC: Final = 30 * DAY_SEC  # a refresh token (rotated on every use)
CONNECTOR_CHECK_TTL_SEC: Final = 60  # the MCP server trusts a checked token this long
CONNECTOR_REDIRECT_URIS_MAX: Final = 10  # redirect URIs one registered client may hold
CONNECTOR_CLIENT_NAME_MAX_CHARS: Final = 200
# a signed authorize request (it carries the host's state and redirect URI); /authorize refuses
# a longer one, since it must fit in the console login's `next` and in one HTTP request line
CONNECTOR_REQUEST_MAX_CHARS: Final = 6000
# the console login's `next`: a consent URL with its signed request fits
CONSOLE_NEXT_MAX_CHARS: Final = CONNECTOR_REQUEST_MAX_CHARS + 144
SIGNING_MESSAGE_MAX_CHARS: Final = 100_000  # reference; what one signing request may carry
SIGNING_MAX_PENDING_PER_AGENT: Final = 10  # reference; more open requests is a 429

# --- durable waits (SPEC 8) ---------------------------------------------------------------------
SIGNING_REQUEST_TTL_SEC: Final = 300  # how long a signing request waits for the signature
TEAM_FOUNDING_TTL_SEC: Final = 24 * HOUR_SEC  # founding members must all accept within this
DIARY_TRANSFER_TTL_SEC: Final = 7 * DAY_SEC  # destination owner must accept within this

# --- worker liveness (DECISIONS "Production beyond one machine") ------------------------------
# A long activity (sweeps, imports, embedding batches) heartbeats; silent this long, its attempt
# is retried on another worker instead of waiting out its start-to-close timeout. The SDK sends
# at most one heartbeat per 80 % of this, so calling it per row costs nothing.
ACTIVITY_HEARTBEAT_TIMEOUT_SEC: Final = 10

# --- tasks (SPEC 8; DECISIONS "Tasks") ----------------------------------------------------------
TASK_LEASE_DEFAULT_SEC: Final = 300  # claim lease unless the task sets leaseTtlSec
TASK_LEASE_MIN_SEC: Final = 1  # reference bounds for leaseTtlSec
TASK_LEASE_MAX_SEC: Final = HOUR_SEC
ATTEMPT_HEARTBEAT_WINDOW_SEC: Final = 300  # silence longer than this times the attempt out
ATTEMPT_RESULT_DEADLINE_SEC: Final = 7200  # a running attempt must complete within this
TASK_MAX_ATTEMPTS_DEFAULT: Final = 1  # no retries unless the proposer asks
TASK_MESSAGES_BATCH_MAX: Final = 200  # messages per POST .../messages batch
TASK_MESSAGE_KIND_MAX_CHARS: Final = 64  # kinds match ^[a-z_]{1,64}$
ARTIFACT_MAX_BYTES: Final = 25 * MIB  # per artifact upload
ARTIFACT_ORPHAN_GRACE_SEC: Final = 48 * HOUR_SEC  # default of TASK_ARTIFACT_ORPHAN_GRACE_SEC
ARTIFACT_KIND_MAX_CHARS: Final = 100  # reference bounds of the upload's `kind` and `title`
ARTIFACT_TITLE_MAX_CHARS: Final = 255
ARTIFACT_CONTENT_TYPE_MAX_CHARS: Final = 200  # reference (TaskRef.artifact.contentType)
ARTIFACT_CONTENT_ENCODING_MAX_CHARS: Final = 100  # ours: `gzip`, `br`, `zstd`, `gzip, br`...
ARTIFACT_STREAM_CHUNK_BYTES: Final = MIB  # bytes hashed/spooled/sent per step of a stream
ARTIFACT_SWEEP_BATCH_MAX: Final = 1000  # staged rows, and blobs, one sweep run deletes at most
ARTIFACT_SWEEP_INTERVAL_SEC: Final = HOUR_SEC  # the schedule of the ArtifactSweep workflow
# Maintenance schedules (SPEC 6; workflows/maintenance.py)
MAINTENANCE_BATCH_MAX: Final = 1000  # rows of each kind one purge run deletes at most
MAINTENANCE_PURGE_INTERVAL_SEC: Final = HOUR_SEC  # the schedule of ExpiredRowsPurge
# an expired signing request stays readable (GET shows `expired`) this long, then is purged
SIGNING_REQUEST_RETENTION_SEC: Final = 24 * HOUR_SEC
# used recovery nonces and unredeemed vouchers are purged this long after their expiry, so that
# a clock skew between the hosts that check them and Temporal's never revives one
MAINTENANCE_EXPIRY_MARGIN_SEC: Final = HOUR_SEC
# the browser OAuth connector's authorization codes (used or not) are purged this long after
# their expiry: until then a replayed code is still recognised as used, and revokes its grant
CONNECTOR_CODE_RETENTION_SEC: Final = DAY_SEC
# its grants, revoked or with an expired refresh token, are purged this long after that
CONNECTOR_GRANT_RETENTION_SEC: Final = 30 * DAY_SEC
STALE_TASK_SCAN_INTERVAL_SEC: Final = 15 * MINUTE_SEC  # the schedule of StaleTaskReconcile
# a task row its workflow wrote this recently is not looked at (no race with a workflow that is
# just starting or ending, nor with rows a test writes by hand)
STALE_TASK_GRACE_SEC: Final = HOUR_SEC
STALE_TASK_PAGE: Final = 100  # task rows one reconcile step looks at
STALE_TASK_SCAN_MAX: Final = 10_000  # non-terminal task rows one reconcile run looks at at most
SECRET_FILE_MAX_BYTES: Final = 65_536  # a `file:` secret reference larger than this is refused
# spec 8 "local byte limit": an executor's output line or artifact file above it fails the attempt
DAEMON_LOCAL_BYTE_LIMIT: Final = 25 * MIB
RUNTIME_ID_MAX_CHARS: Final = 200  # the claiming runtime's stable id, as a daemon names itself
# Task-type input/output schemas (SPEC 2.6; reference task types, anchor-notes section 4).
TASK_CONTEXT_BINDINGS_MAX: Final = 5  # input.context entries
TASK_CONTEXT_SLUG_MAX_CHARS: Final = 64
TASK_CONTEXT_CONTENT_MAX_CHARS: Final = 65_536
TASK_CONSTRAINTS_MAX: Final = 20  # freeform input.constraints
TASK_OUTPUT_ARTIFACTS_MAX: Final = 20  # freeform output.artifacts
TASK_ARTIFACT_BODY_MAX_CHARS: Final = 65_536  # inline body of a freeform output artifact
TASK_VARIANT_LABEL_MAX_CHARS: Final = 64  # run_eval / judge_eval_attempt variantLabel
TASK_COMMIT_SHA_MIN_CHARS: Final = 7  # an abbreviated git sha
CURATE_PACK_MIN_TOKEN_BUDGET: Final = 500
RUBRIC_WEIGHT_TOLERANCE: Final = 1e-6  # rubric weights must sum to 1 within this
TASK_VALIDATION_MAX_ERRORS: Final = 50  # field errors listed in one 400
# POST /tasks body (reference bounds where marked; anchor-notes 4, 9).
TASK_TITLE_MAX_CHARS: Final = 255  # reference
TASK_TYPE_MAX_CHARS: Final = 64  # ours: the longest built-in name is 18
TASK_ALLOWED_PROFILES_MAX: Final = 16  # reference
# Runtime profiles (DECISIONS "Runtime profiles"; ours).
RUNTIME_PROFILE_NAME_MAX_CHARS: Final = 100
RUNTIME_PROFILES_PER_TEAM_MAX: Final = 100  # a team's profiles are listed in one page
TASK_REFERENCES_MAX: Final = 50  # ours: references per task
TASK_MAX_ATTEMPTS_MAX: Final = 10  # ours: bounds how long one task can keep retrying
TASK_TIMEOUT_MIN_SEC: Final = 1  # reference bounds of dispatchTimeoutSec / runningTimeoutSec
TASK_TIMEOUT_MAX_SEC: Final = DAY_SEC
TASK_EXPIRES_IN_DEFAULT_SEC: Final = 90 * DAY_SEC  # reference: default = max = 90 days
TASK_EXPIRES_IN_MAX_SEC: Final = 90 * DAY_SEC
IDEMPOTENCY_KEY_MAX_CHARS: Final = 200  # reference: Idempotency-Key is 1..200 characters
# The attempt workflow (SPEC 3.1; reference bounds where marked).
TASK_REASON_MAX_CHARS: Final = 512  # reference: abort reason; cancel reasons share it
TASK_ERROR_CODE_MAX_CHARS: Final = 100  # ours: a fail body's error.code
TASK_ERROR_MESSAGE_MAX_CHARS: Final = ERROR_DETAIL_MAX_CHARS  # ours: like a problem detail
# History events after which a task workflow continues as new at its next quiet moment (a
# heartbeat costs about 6 events; Temporal warns at 10 240 and stops a run at 51 200).
TASK_WORKFLOW_HISTORY_MAX_EVENTS: Final = 2000

# --- packs (SPEC 2.5, 8) ------------------------------------------------------------------------
PACK_TTL_SEC: Final = 7 * DAY_SEC  # default expires_at = now + 7 days unless pinned
PACK_ENTRIES_MIN: Final = 1  # reference: a pack selects 1..500 entries
PACK_ENTRIES_MAX: Final = 500
PACK_TOKEN_BUDGET_MIN: Final = 1  # reference: tokenBudget 1..100 000
PACK_TOKEN_BUDGET_MAX: Final = 100_000
PACK_PARAMS_MAX_BYTES: Final = 16_384  # ours: free-form params, bounded like any travelling value
PACK_PROVENANCE_DEPTH_MAX: Final = 10  # supersedes hops a provenance graph follows (0..10)
PACK_PROVENANCE_DEPTH_DEFAULT: Final = 3  # ours
RENDER_METHOD_MAX_CHARS: Final = 100  # reference: renderMethod 1..100
RENDERED_MARKDOWN_MAX_CHARS: Final = 500_000  # reference: agent-rendered Markdown
RENDERED_PACK_DESCRIPTION_MAX_CHARS: Final = 256  # reference
PACK_SWEEP_BATCH_MAX: Final = 100  # reference: packs (and rendered packs) deleted per sweep run
PACK_SWEEP_INTERVAL_SEC: Final = HOUR_SEC  # reference: PACK_GC_CRON hourly

# --- people ------------------------------------------------------------------------------------
DISPLAY_NAME_MAX_CHARS: Final = 100  # ours (issue 24): a human's display name, varchar(100)

# --- teams, groups, projects, invites (SPEC 2.2, 3.2; reference where marked) -------------------
TEAM_NAME_MAX_CHARS: Final = 255  # teams, groups and projects alike (varchar)
TEAM_FOUNDING_MEMBERS_MAX: Final = 50  # ours: one founding is a handful of co-founders
TEAM_INVITE_TTL_HOURS_MIN: Final = 1  # reference bounds of expiresInHours
TEAM_INVITE_TTL_HOURS_DEFAULT: Final = 7 * 24  # reference: a week
TEAM_INVITE_TTL_HOURS_MAX: Final = 30 * 24  # reference: 720 h
TEAM_INVITE_MAX_USES_DEFAULT: Final = 1  # reference: single use unless asked
TEAM_INVITE_MAX_USES_MAX: Final = 1000  # ours: bounds a leaked code's reach
TEAM_INVITE_CODE_RANDOM_BYTES: Final = 16  # reference: 22 base64url characters after the prefix

# --- agent keys (SPEC 8) ------------------------------------------------------------------------
AGENT_KEY_TTL_DAYS_MIN: Final = 1
AGENT_KEY_TTL_DAYS_DEFAULT: Final = 30
AGENT_KEY_TTL_DAYS_MAX: Final = 90
AGENT_KEY_LIST_MAX_UPSTREAM_PAGES: Final = 5  # credential-store pages scanned per list request
AGENT_KEY_SECRET_BYTES: Final = 32  # 256 random bits after `service_ak_<key id>_`
AGENT_KEY_NAME_MAX_CHARS: Final = 100  # ours: a label such as "daemon on build-3"
AGENT_KEY_REVOCATION_MAX_CHARS: Final = 500  # ours: a revocation's `description`


# --- page sizes (DECISIONS "Tasks", reference buckets) ------------------------------------------
class PageSize(NamedTuple):
    """The ``limit`` a list endpoint uses when none is given, and the most it accepts."""

    default: int
    max: int


ENTRIES_PAGE: Final = PageSize(20, 100)
SEARCH_PAGE: Final = PageSize(10, 100)
PUBLIC_FEED_PAGE: Final = PageSize(20, 100)
PUBLIC_SEARCH_PAGE: Final = PageSize(10, 50)
RELATIONS_PAGE: Final = PageSize(50, 100)
PACKS_PAGE: Final = PageSize(20, 100)  # packs and rendered packs
TASKS_PAGE: Final = PageSize(20, 100)
TASK_MESSAGES_PAGE: Final = PageSize(200, 200)
# how often an A2A stream (SendStreamingMessage, SubscribeToTask) reads its task's rows again
# behind a transaction pooler, where no session LISTENs for the task's changes
# (infra/task_changes.py); elsewhere it reads when the task changes
A2A_STREAM_POLL_SEC: Final = 0.5
ARTIFACTS_PAGE: Final = PageSize(50, 100)
AGENT_KEYS_PAGE: Final = PageSize(20, 100)
SIGNING_REQUESTS_PAGE: Final = PageSize(20, 100)

# --- the largest integers a request may carry (schemas/numbers.py types every request integer
# with one of them; a larger one is a 400, never an overflow)
SQL_INT_MAX: Final = 2**31 - 1  # a Postgres `integer`: ranks, attempt numbers, seqs, offsets
JSON_INT_MAX: Final = 2**53 - 1  # exact in every JSON reader (jsonb counters, JavaScript)

# --- the HTTP parser (api/server.py): what one request's head may hold ----------------------------
# The two sizes differ so that the limit a too-long line exceeded tells which part it was.
REQUEST_LINE_MAX_BYTES: Final = 8192  # method, target and version: 8 KiB, longer is 414
HEADER_FIELD_MAX_BYTES: Final = 8190  # one header's name and value (aiohttp's default): 431
REQUEST_HEADERS_MAX: Final = 128  # headers per request (aiohttp's default): more is 431

# --- outages: a 503 (a dependency cannot answer right now) tells the client when to retry ------
UNAVAILABLE_RETRY_AFTER_SEC: Final = 2
# the longest wait for a free pooled database connection before that 503 (a setting's default)
DATABASE_ACQUIRE_TIMEOUT_SEC: Final = 5.0

# --- rate limits: requests per identity (else client IP) per minute (reference buckets) ---------
# Defaults of the `SERVICE_RATE_LIMIT_<BUCKET>` settings; shared by every API process.
# how often each API process deletes rate-limit rows that ran out, and at most how many at once
RATE_LIMIT_SWEEP_EVERY_SEC: Final = MINUTE_SEC
RATE_LIMIT_SWEEP_BATCH: Final = 5_000
RATE_LIMITS_PER_MINUTE: Final[Mapping[str, int]] = MappingProxyType(
    {
        "global_auth": 100,  # every authenticated request
        "global_anon": 30,  # every anonymous request
        "global_read": 150,  # authenticated GETs
        "search": 20,  # POST /diary/search (it embeds the query)
        # signing requests created (not the /sign calls): a signed diary's writer needs one per
        # entry and must sustain 30 entries a minute (DECISIONS "Operations")
        "signing": 30,
        "agent_key": 5,  # agent-key create / rotate / revoke
        "recovery": 5,  # /recovery/*
        "registration": 5,  # /auth/register
        "vouch": 5,  # POST /vouch (the reference had this bucket; the value is ours)
        "public_verify": 10,  # one shared bucket for public signature checks
        "public_search": 15,  # public feed search
        "artifact_upload": 20,  # artifact upload and stage
        "pre_auth_ip": 300,  # per IP, before credentials are resolved (not applied yet)
        "connector": 6000,  # the MCP server's back channel, for all its humans together
    }
)
# Leases (api/ratelimit.py): an API process takes places of a bucket of at least
# RATE_LEASE_MIN_LIMIT a period in batches and hands them out itself; a smaller (strict) bucket
# is asked of Postgres on every request. A batch starts at 1 and doubles while leases run out
# before they lapse, up to 1/RATE_LEASE_SHARE of the limit and RATE_LEASE_MAX_PLACES; a lease
# lapses after RATE_LEASE_TTL_SEC (at most 1/RATE_LEASE_SHARE of the period) and its unused
# places go back to the bucket (checked every RATE_LEASE_RETURN_EVERY_SEC).
RATE_LEASE_MIN_LIMIT: Final = 60
RATE_LEASE_SHARE: Final = 10
RATE_LEASE_MAX_PLACES: Final = 64
RATE_LEASE_TTL_SEC: Final = 1.0
RATE_LEASE_RETURN_EVERY_SEC: Final = 0.25
# Buckets that count what requests create: a request that fails gives its place back.
RATE_BUCKETS_COUNTING_CREATED: Final = frozenset({"signing"})

# --- the interactive apps (spec 4.7): the diary map -------------------------------------------
ENTRY_MAP_MAX_ENTRIES: Final = 10_000  # the newest entries a map lays out and keeps interactive
ENTRY_MAP_CACHED_DIARIES: Final = 32  # projections an API process keeps (least recently used out)

# --- timedelta twins of the lifetimes the server applies to a clock ------------------------------
VOUCHER_LIFETIME: Final = timedelta(seconds=VOUCHER_TTL_SEC)
RECOVERY_CODE_LIFETIME: Final = timedelta(seconds=RECOVERY_CODE_TTL_SEC)
SIGNING_REQUEST_WAIT: Final = timedelta(seconds=SIGNING_REQUEST_TTL_SEC)
TEAM_FOUNDING_WAIT: Final = timedelta(seconds=TEAM_FOUNDING_TTL_SEC)
DIARY_TRANSFER_WAIT: Final = timedelta(seconds=DIARY_TRANSFER_TTL_SEC)
PACK_LIFETIME: Final = timedelta(seconds=PACK_TTL_SEC)
ARTIFACT_ORPHAN_GRACE: Final = timedelta(seconds=ARTIFACT_ORPHAN_GRACE_SEC)

# --- diary archives (GET /diaries/{id}/export, POST /diaries/import) --------------------------
DIARY_IMPORT_MAX_BYTES: Final = 32 * MIB  # a CAR upload; ~10 000 entries of 2 KB with room
DIARY_IMPORT_EMBED_BATCH: Final = 32  # entries one embedding step of an import embeds
# ours: a peer record's own id and metadata are kept on its entry (`origin`), bounded like any
# travelling value so one record cannot grow a row (and every read of it) without limit
PEER_RECORD_ID_MAX_CHARS: Final = 255
PEER_RECORD_METADATA_MAX_BYTES: Final = 16_384
# Memory hygiene (issue 26; workflows/consolidation.py, bench/near_duplicates.py)
# Cosine similarity from which an entry's nearest older live entry of its diary is proposed as
# what it supersedes (or elaborates): chosen on the labelled set (bench/results/near_duplicates)
NEAR_DUPLICATE_MIN_SIMILARITY: Final = 0.91
CONSOLIDATION_INTERVAL_SEC: Final = DAY_SEC  # the schedule of ConsolidationSweep
CONSOLIDATION_PAGE: Final = 200  # entries one sweep step looks at
CONSOLIDATION_PAGES_PER_RUN: Final = 50  # steps before the sweep continues as new
# an entry no search or pack returned for this long counts as unretrieved in the hygiene report
HYGIENE_UNRETRIEVED_SEC: Final = 30 * DAY_SEC
# how often the API hands over the ids of the entries it created (for their consolidation) and
# of those searches and packs returned (api/hygiene.py)
HYGIENE_FLUSH_SEC: Final = 5
# entry ids one consolidation or retrievals run carries at most: a consolidation run probes
# them in one local step (a few ms each), well inside its timeout
HYGIENE_BATCH_MAX: Final = 200

# --- the Temporal codec endpoint (docs/temporal.md) ---------------------------------------------
CODEC_PAYLOADS_MAX: Final = 1000  # payloads per /codec/decode or /codec/encode call
