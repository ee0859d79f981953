"""Versioned schema migrations: append, never edit a released one.

Column names follow LCORE's `user_conversation` / `user_turn` tables so its operators
recognise them. Times are ISO-8601 UTC text. Ids are random, so every index costs a
random B-tree write per turn: the turns table has only the response-id index it is
looked up by (a conversation's turns are linked by `prior_response_id`); an index on
`turns.conversation_id` belongs with the first endpoint that lists them.
"""

MIGRATIONS: list[tuple[int, list[str]]] = [
    (1, [
        """CREATE TABLE conversations (
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
        )""",
        "CREATE INDEX conversations_user ON conversations (user_id)",
        """CREATE TABLE turns (
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
        )""",
    ]),
    # The local engine's responses (engine mode only): the response object, this
    # request's input items, and the whole item history through this response, so a
    # continuation reads one row. Listed per user in creation order (`seq`).
    (2, [
        """CREATE TABLE responses (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            user_id TEXT NOT NULL,
            status TEXT NOT NULL,
            response BLOB NOT NULL,
            input BLOB NOT NULL,
            context BLOB NOT NULL
        )""",
        "CREATE INDEX responses_user ON responses (user_id, seq)",
    ]),
]
