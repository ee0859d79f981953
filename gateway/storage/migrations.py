"""Versioned schema migrations: append, never edit a released one.

Column names follow LCORE's `user_conversation` / `user_turn` tables so its operators
recognise them. Times are ISO-8601 UTC text. Ids are random, so every index costs a
random B-tree write per turn: the turns table has only the response-id index it is
looked up by (a conversation's turns are linked by `prior_response_id`, which is how the
conversations endpoints walk them: `history.py`; an index on `conversation_id` measured
12-16 µs of CPU per turn, about 5 % of a turn, for reads that are rare).

Every name the gateway creates starts with `gateway_`: on a PostgreSQL database shared
with LCORE, its own tables (`user_conversation`, `user_turn`, the conversation cache's
`conversations`, `quota_limits`, `token_usage`) never collide with ours. A new
database is created at the latest schema at once (`BASELINE`, which must equal what the
migrations make of an old one: a test checks it); `MIGRATIONS` bring an existing one up.
"""

# Where SQLite files from before version 2 recorded their versions.
LEGACY_BOOKKEEPING = "schema_migrations"

# The columns as version 1 made them; version 2 only renamed. A migration that changes
# columns changes BASELINE's own copy, never these.
_CONVERSATION_COLUMNS_V1 = """(
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    upstream_id TEXT,
    created_at TEXT NOT NULL,
    last_message_at TEXT NOT NULL,
    last_used_model TEXT,
    last_used_provider TEXT,
    last_response_id TEXT,
    message_count INTEGER NOT NULL DEFAULT 0,
    turns_recorded INTEGER NOT NULL DEFAULT 0,
    topic_summary TEXT NOT NULL DEFAULT '',
    generate_topic_summary INTEGER NOT NULL DEFAULT 0
)"""
_TURN_COLUMNS_V1 = """(
    response_id TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL,
    turn_number INTEGER NOT NULL,
    prior_response_id TEXT,
    previous_response_id TEXT,
    model TEXT,
    provider TEXT,
    status TEXT NOT NULL,
    started_at TEXT NOT NULL,
    completed_at TEXT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0
)"""

_RESPONSES_TABLE = """CREATE TABLE gateway_responses (
    id TEXT PRIMARY KEY,
    seq BIGINT NOT NULL,
    user_id TEXT NOT NULL,
    status TEXT NOT NULL,
    response TEXT NOT NULL,
    input TEXT NOT NULL,
    context TEXT NOT NULL
)"""
_RESPONSES_INDEX = "CREATE INDEX gateway_responses_user ON gateway_responses (user_id, seq)"
# Background responses (both modes): one row per response (its owner, the process
# running it, its status and last object, a heartbeat in epoch milliseconds) and its
# stream's frames, a row per batch of events numbered first_seq..last_seq.
_BACKGROUND_TABLE = """CREATE TABLE gateway_background (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    status TEXT NOT NULL,
    response TEXT NOT NULL,
    runner TEXT NOT NULL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL
)"""
_BACKGROUND_EVENTS_TABLE = """CREATE TABLE gateway_background_events (
    response_id TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    frames TEXT NOT NULL,
    PRIMARY KEY (response_id, first_seq)
)"""
_BACKGROUND_INDEX = "CREATE INDEX gateway_background_status ON gateway_background (status, updated_at)"

# Quotas (issue 9). One balance per (limiter name, subject: a user id, or '' for the
# cluster), never shared between two limiters of a type; replenishment is counted from
# `anchor` (`periods` applied so far, `next_refill` the next boundary: quota/balances.py).
# `reserved` is what live reservations hold; each is also a row per (turn, limiter), so
# one whose turn never settles (a replica that died) is released once `expires_at` passes.
# Token history per user, provider, model and UTC day; increments remember their
# client key (idempotency). Counts are BIGINT on both engines.
_QUOTA_TABLES = [
    """CREATE TABLE gateway_quota_balances (
    limiter TEXT NOT NULL,
    subject TEXT NOT NULL,
    available BIGINT NOT NULL,
    reserved BIGINT NOT NULL DEFAULT 0,
    anchor TEXT NOT NULL,
    periods INTEGER NOT NULL,
    period TEXT NOT NULL,
    next_refill TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (limiter, subject)
)""",
    """CREATE TABLE gateway_quota_reservations (
    id TEXT NOT NULL,
    limiter TEXT NOT NULL,
    subject TEXT NOT NULL,
    tokens BIGINT NOT NULL,
    expires_at TEXT NOT NULL,
    PRIMARY KEY (id, limiter)
)""",
    "CREATE INDEX gateway_quota_reservations_balance ON gateway_quota_reservations (limiter, subject)",
    """CREATE TABLE gateway_token_usage (
    user_id TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    day TEXT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    PRIMARY KEY (user_id, provider, model, day)
)""",
    """CREATE TABLE gateway_quota_increments (
    idempotency_key TEXT NOT NULL,
    subject TEXT NOT NULL,
    admin TEXT NOT NULL,
    tokens TEXT NOT NULL,
    applied_at TEXT NOT NULL,
    PRIMARY KEY (idempotency_key, subject)
)""",
]

_TURN_TOKENS = "ALTER TABLE gateway_turns ADD COLUMN tokens BIGINT NOT NULL DEFAULT 0"
# The gateway's own turn store (issue 22): what a turn said, as JSON text (the user's
# question, the answer's text, the tool items; `turns/content.py`), written in the same
# statement as the turn's row, so `/v1` and `/v2/conversations` read a conversation's
# history without the upstream (walking the turns' `prior_response_id` links, no index).
_TURN_CONTENT = [
    "ALTER TABLE gateway_turns ADD COLUMN content TEXT",
]

# Feedback (issue 22): a row per `POST /v1/feedback` (the JSON files under
# `feedback_storage` are LCORE's record; the rows let replicas and operators query it),
# and settings every replica reads instead of keeping them per process (LCORE keeps the
# feedback flag in memory): a name, its JSON value, who set it and when.
_FEEDBACK_TABLES = [
    """CREATE TABLE gateway_feedback (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    feedback TEXT NOT NULL
)""",
    """CREATE TABLE gateway_settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at TEXT NOT NULL
)""",
]

# Deleted conversations (issue 22), written in the transaction that deletes one: its
# upstream state, pending until the upstream confirmed it is gone (so an upstream
# unreachable at that moment, or a process that stopped in between, is retried), and a
# tombstone for a day after, so a turn that was still running when it was deleted and
# brought it back is found and deleted again.
_DELETED_CONVERSATIONS = """CREATE TABLE gateway_deleted_conversations (
    conversation_id TEXT PRIMARY KEY,
    upstream_id TEXT,
    response_ids TEXT NOT NULL,
    upstream_pending INTEGER NOT NULL,
    attempted_at TEXT NOT NULL,
    deleted_at TEXT NOT NULL
)"""

# OpenAI's Conversations API (issue 23): a conversation's `metadata` as the client set
# it (JSON text; NULL for one a turn created: such a one was never created through the
# API), and the items a client added to a conversation the gateway keeps (not the
# upstream's): `pending` until the conversation's next turn sent them as its input.
# Looked up by conversation (the primary key's first column), ordered by `position`.
_CONVERSATION_METADATA = "ALTER TABLE gateway_conversations ADD COLUMN metadata TEXT"
_CONVERSATION_ITEMS = """CREATE TABLE gateway_conversation_items (
    conversation_id TEXT NOT NULL,
    id TEXT NOT NULL,
    position BIGINT NOT NULL,
    item TEXT NOT NULL,
    pending INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (conversation_id, id)
)"""

# The form a turn showed `conversation` in (`turns/content.py`'s codes: 0 the default
# `conv_` string, 1 OpenAI's `{"id": ...}`, 2 the bare id; NULL for a turn recorded
# before the turn store, which knows none), in a column of its own, so a turn continuing
# or forking from it by `previous_response_id` learns it from the row it reads anyway
# instead of reading and parsing that turn's whole content again. Existing rows get it
# from their content, where it is the last key (`"f":1}` / `"f":2}`; orjson writes no
# spaces, and a string value cannot end the text with `1}` or `2}`).
_TURN_FORM = [
    "ALTER TABLE gateway_turns ADD COLUMN conversation_form INTEGER",
]
_TURN_FORM_BACKFILL = (
    "UPDATE gateway_turns SET conversation_form = CASE WHEN content IS NULL THEN NULL "
    "WHEN content LIKE '%,\"f\":1}' THEN 1 WHEN content LIKE '%,\"f\":2}' THEN 2 ELSE 0 END")

MIGRATIONS: list[tuple[int, list[str]]] = [
    (1, [
        f"CREATE TABLE conversations {_CONVERSATION_COLUMNS_V1}",
        "CREATE INDEX conversations_user ON conversations (user_id)",
        f"CREATE TABLE turns {_TURN_COLUMNS_V1}",
    ]),
    # The gateway's names no longer collide with LCORE's tables in a shared database.
    (2, [
        "ALTER TABLE conversations RENAME TO gateway_conversations",
        "ALTER TABLE turns RENAME TO gateway_turns",
        "DROP INDEX conversations_user",
        "CREATE INDEX gateway_conversations_user ON gateway_conversations (user_id)",
    ]),
    # The local engine's responses (engine mode only): the response object, this
    # request's input items and the whole item history through this response, as JSON
    # text, so a continuation reads one row. Listed per user in creation order (`seq`,
    # given by the gateway: storage/engine_responses.py).
    (3, [_RESPONSES_TABLE, _RESPONSES_INDEX]),
    (4, _QUOTA_TABLES),
    # Background responses and their recorded events (storage/background_responses.py).
    (5, [_BACKGROUND_TABLE, _BACKGROUND_EVENTS_TABLE, _BACKGROUND_INDEX]),
    # A turn's reported input + output tokens (written by its settlement): the next turn
    # of its conversation sends them again, so its quota estimate counts them (issue 19).
    (6, [_TURN_TOKENS]),
    (7, _TURN_CONTENT),
    (8, _FEEDBACK_TABLES),
    (9, [_DELETED_CONVERSATIONS]),
    (10, [_CONVERSATION_METADATA, _CONVERSATION_ITEMS]),
    (11, [*_TURN_FORM, _TURN_FORM_BACKFILL]),
]

BASELINE: list[str] = [
    f"CREATE TABLE gateway_conversations {_CONVERSATION_COLUMNS_V1}",
    "CREATE INDEX gateway_conversations_user ON gateway_conversations (user_id)",
    f"CREATE TABLE gateway_turns {_TURN_COLUMNS_V1}",
    _TURN_TOKENS,
    *_TURN_CONTENT,
    _RESPONSES_TABLE,
    _RESPONSES_INDEX,
    _BACKGROUND_TABLE,
    _BACKGROUND_EVENTS_TABLE,
    _BACKGROUND_INDEX,
    *_QUOTA_TABLES,
    *_FEEDBACK_TABLES,
    _DELETED_CONVERSATIONS,
    _CONVERSATION_METADATA,
    _CONVERSATION_ITEMS,
    *_TURN_FORM,
]
