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
EMBEDDING_BATCH_MIN: Final = 16  # batches are built by sorted length, 16..32 texts each
EMBEDDING_BATCH_MAX: Final = 32
SEARCH_MAX_COSINE_DISTANCE: Final = 0.6  # vector candidates farther than this are noise
SEARCH_CANDIDATE_FACTOR: Final = 2  # each arm fetches top 2 x limit before fusion
SEARCH_RRF_K: Final = 60  # reciprocal-rank-fusion constant, the usual value

# --- compression (DECISIONS "Memory") -----------------------------------------------------------
WORDS_PER_TOKEN: Final = 0.75  # tokens = ceil(words / 0.75)
SUMMARY_SENTENCE_RATIO: Final = 0.3  # `summary` keeps the best 30 % of sentences
KEYWORDS_MAX_TOKENS: Final = 30  # `keywords` keeps distinctive words up to this budget

# --- identity and authentication (SPEC 2.3, 4.1, 8; DECISIONS "Identity") -----------------------
ED25519_PUBLIC_KEY_BYTES: Final = 32  # raw key, not an SPKI wrapper
ED25519_SIGNATURE_BYTES: Final = 64
SIGNATURE_B64_MAX_CHARS: Final = 88  # base64 of 64 bytes with padding
PUBLIC_KEY_MAX_CHARS: Final = 60  # reference; "ed25519:" + 44 base64 chars fits
VOUCHER_TTL_SEC: Final = 24 * HOUR_SEC  # voucher expires 24 h after issue
MAX_OPEN_VOUCHERS_PER_ISSUER: Final = 5  # unredeemed and unexpired, per issuing agent
RECOVERY_CHALLENGE_TTL_SEC: Final = 5 * MINUTE_SEC  # challenge age limit at verify
RECOVERY_CHALLENGE_MAX_CHARS: Final = 500  # reference; bounds work before the HMAC check
RECOVERY_CODE_TTL_SEC: Final = 15 * MINUTE_SEC  # one-time recovery code lifetime
RECOVERY_CODE_MAX_TRIES: Final = 5  # wrong codes before the flow is burned
ACCESS_TOKEN_TTL_SEC: Final = HOUR_SEC  # OAuth2 client_credentials JWT; no refresh token

# --- durable waits (SPEC 8) ---------------------------------------------------------------------
SIGNING_REQUEST_TTL_SEC: Final = 300  # how long a signing request waits for the signature
TEAM_FOUNDING_TTL_SEC: Final = 24 * HOUR_SEC  # founding members must all accept within this
DIARY_TRANSFER_TTL_SEC: Final = 7 * DAY_SEC  # destination owner must accept within this

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
SECRET_FILE_MAX_BYTES: Final = 65_536  # a `file:` secret reference larger than this is refused

# --- packs (SPEC 2.5, 8) ------------------------------------------------------------------------
PACK_TTL_SEC: Final = 7 * DAY_SEC  # default expires_at = now + 7 days unless pinned

# --- agent keys (SPEC 8) ------------------------------------------------------------------------
AGENT_KEY_TTL_DAYS_MIN: Final = 1
AGENT_KEY_TTL_DAYS_DEFAULT: Final = 30
AGENT_KEY_TTL_DAYS_MAX: Final = 90
AGENT_KEY_LIST_MAX_UPSTREAM_PAGES: Final = 5  # credential-store pages scanned per list request

# --- errors (STYLE "Errors", habit 6) -----------------------------------------------------------
ERROR_DETAIL_MAX_CHARS: Final = 8000  # problem `detail` is truncated to this


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
ARTIFACTS_PAGE: Final = PageSize(50, 100)
AGENT_KEYS_PAGE: Final = PageSize(20, 100)
SIGNING_REQUESTS_PAGE: Final = PageSize(20, 100)
VOUCH_GRAPH_PAGE: Final = PageSize(200, 1000)

# --- rate limits: requests per identity (else client IP) per minute (reference buckets) ---------
RATE_LIMIT_WINDOW_SEC: Final = MINUTE_SEC
RATE_LIMITS_PER_MINUTE: Final[Mapping[str, int]] = MappingProxyType(
    {
        "global_auth": 100,  # every authenticated request
        "global_anon": 30,  # every anonymous request
        "global_read": 150,  # authenticated GETs
        "search": 20,  # POST /diary/search (it embeds the query)
        "signing": 5,  # signing-request writes
        "agent_key": 5,  # agent-key create / rotate / revoke
        "recovery": 5,  # /recovery/*
        "registration": 5,  # /auth/register
        "vouch": 5,  # POST /vouch (the reference had this bucket; the value is ours)
        "public_verify": 10,  # one shared bucket for public signature checks
        "public_search": 15,  # public feed search
        "readiness": 12,  # /health/ready
        "artifact_upload": 20,  # artifact upload and stage
        "pre_auth_ip": 300,  # per IP, before credentials are resolved
    }
)

# --- timedelta twins of the lifetimes the server applies to a clock ------------------------------
VOUCHER_LIFETIME: Final = timedelta(seconds=VOUCHER_TTL_SEC)
RECOVERY_CHALLENGE_LIFETIME: Final = timedelta(seconds=RECOVERY_CHALLENGE_TTL_SEC)
RECOVERY_CODE_LIFETIME: Final = timedelta(seconds=RECOVERY_CODE_TTL_SEC)
ACCESS_TOKEN_LIFETIME: Final = timedelta(seconds=ACCESS_TOKEN_TTL_SEC)
SIGNING_REQUEST_WAIT: Final = timedelta(seconds=SIGNING_REQUEST_TTL_SEC)
TEAM_FOUNDING_WAIT: Final = timedelta(seconds=TEAM_FOUNDING_TTL_SEC)
DIARY_TRANSFER_WAIT: Final = timedelta(seconds=DIARY_TRANSFER_TTL_SEC)
PACK_LIFETIME: Final = timedelta(seconds=PACK_TTL_SEC)
ARTIFACT_ORPHAN_GRACE: Final = timedelta(seconds=ARTIFACT_ORPHAN_GRACE_SEC)
