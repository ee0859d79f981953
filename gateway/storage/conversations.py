"""The conversations repository: who owns which conversation, and its turns.

The gateway keeps what it needs to decide: the owner, the upstream id, the last model
and response, and one row per turn so a response id can be traced to its conversation
and owner; each turn's row also holds what the turn said (the turn store, read by the
conversations endpoints through `history.py`).

Every turn reads its conversation (or the turn it continues), and a read costs more CPU
in thread hand-offs than the rest of a turn's own work; so recent records are kept in
memory, written through: a record is cached when read and updated when this process
commits a turn, so it is what the database holds. That holds while this process is the
database's only writer, which it is with SQLite; several replicas on one PostgreSQL
(`Database.shared`) cannot trust it for the fields that change (last model, last
response, a deleted turn), so there the repository reads the database every time.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, TypeVar

from gateway.storage.database import Database, Params, Row

# Records kept in memory, of each kind: about half a kilobyte each, so a few MiB in all
# (what the cache holds stays resident after a load).
_CACHED = 2048
# A turn's records as the writer queues them: its conversation and its turn (None: no turn row).
_Entry = tuple["ConversationRecord", "TurnRecord | None"]


@dataclass(frozen=True, slots=True)
class ConversationRecord:
    id: str
    user_id: str
    upstream_id: str | None
    created_at: str
    last_message_at: str
    last_used_model: str | None
    last_used_provider: str | None
    last_response_id: str | None
    message_count: int
    topic_summary: str
    generate_topic_summary: bool
    turns_recorded: int = 0


@dataclass(frozen=True, slots=True)
class TurnRecord:
    conversation_id: str
    response_id: str
    previous_response_id: str | None   # what the client sent
    model: str | None
    provider: str | None
    status: str
    started_at: str
    completed_at: str
    turn_number: int = 0
    prior_response_id: str | None = None  # the conversation's previous turn (set when saved)
    tokens: int = 0                       # the upstream's reported input + output tokens
    # What the turn said (JSON text: `turns/content.py`), written with the row; never
    # read back into a record (the conversations endpoints read it: `history.py`).
    content: str | None = None
    # The form the turn showed `conversation` in (`turns/content.py`'s `form_code`; None:
    # a turn recorded before the turn store, which knows none).
    conversation_form: int | None = None


_CONVERSATION_COLUMNS = ("id, user_id, upstream_id, created_at, last_message_at, last_used_model, "
                         "last_used_provider, last_response_id, message_count, topic_summary, generate_topic_summary, "
                         "turns_recorded")
_TURN_COLUMNS = ("conversation_id, response_id, previous_response_id, model, provider, status, started_at, "
                 "completed_at, turn_number, prior_response_id, tokens, conversation_form")


def _conversation(row: Mapping[str, Any]) -> ConversationRecord:
    return ConversationRecord(**{**row, "generate_topic_summary": bool(row["generate_topic_summary"])})


class _Lru(OrderedDict[str, Any]):
    def remember(self, key: str, value: object) -> None:
        self[key] = value
        self.move_to_end(key)
        if len(self) > _CACHED:
            self.popitem(last=False)


class _Forgetful(_Lru):
    """The cache of a repository whose database other processes write: keeps nothing."""

    def remember(self, key: str, value: object) -> None:
        pass

    def __setitem__(self, key: str, value: object) -> None:
        pass


class ConversationRepository:
    def __init__(self, db: Database):
        self._db = db
        self._conversations: _Lru = _Lru()   # id -> ConversationRecord
        self._turns: _Lru = _Lru()           # response id -> TurnRecord (not deleted)
        if db.shared:
            self._conversations = self._turns = _Forgetful()

    async def get(self, conversation_id: str) -> ConversationRecord | None:
        cached: ConversationRecord | None = self._conversations.get(conversation_id)
        if cached is not None:
            return cached
        row = await self._db.fetchone(f"SELECT {_CONVERSATION_COLUMNS} FROM gateway_conversations WHERE id = :id",
                                      {"id": conversation_id})
        if row is None:
            return None
        conversation = _conversation(row)
        self._conversations.remember(conversation.id, conversation)
        return conversation

    async def find_turn(self, response_id: str) -> tuple[TurnRecord, ConversationRecord] | None:
        turn = self._turns.get(response_id)
        if turn is None:
            row = await self._db.fetchone(f"SELECT {_TURN_COLUMNS} FROM gateway_turns WHERE response_id = :id AND deleted = 0",
                                          {"id": response_id})
            if row is None:
                return None
            turn = TurnRecord(**row)
            self._turns.remember(response_id, turn)
        conversation = await self.get(turn.conversation_id)
        return (turn, conversation) if conversation else None

    async def content(self, response_id: str) -> str | None:
        """A turn's stored content (`turns/content.py`), read only when asked for."""
        row = await self._db.fetchone("SELECT content FROM gateway_turns WHERE response_id = :id AND deleted = 0",
                                      {"id": response_id})
        return row["content"] if row else None

    async def save(self, conversation: ConversationRecord, turn: TurnRecord | None) -> None:
        await self.save_many([(conversation, turn)])

    async def save_many(self, entries: list[tuple[ConversationRecord, TurnRecord | None]],
                        extra: Sequence[tuple[str, Params]] = ()) -> list[Row]:
        """Create new conversations and append turns for a whole batch in one transaction
        (group commit), with one multi-row statement per table and round, all run in one
        trip to the database's thread; `extra` statements (the turns' quota charges)
        commit in the same transaction; returns the rows their RETURNING clauses gave."""
        statements: list[tuple[str, Params]] = []
        if self._db.shared:
            # Other replicas append to these conversations too: lock their rows first
            # (creating the new ones, uncounted), in id order so two batches cannot
            # deadlock, so the turns below are numbered and linked from what the others
            # committed (READ COMMITTED: each later statement sees their commits).
            first = sorted({c.id: c for c, _ in entries}.values(), key=lambda c: c.id)
            for piece in _chunks([first]):
                statements.append((
                    "INSERT INTO gateway_conversations AS c (id, user_id, upstream_id, created_at, last_message_at, "
                    "last_used_model, last_used_provider, topic_summary, generate_topic_summary) VALUES "
                    + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(piece))
                    + " ON CONFLICT (id) DO UPDATE SET turns_recorded = c.turns_recorded",
                    [v for c in piece for v in (c.id, c.user_id, c.upstream_id, c.created_at, c.last_message_at,
                                                c.last_used_model, c.last_used_provider, c.topic_summary,
                                                int(c.generate_topic_summary))]))
        for round_ in _chunks(_rounds(entries)):
            turns = [(t.response_id, t.conversation_id, t.conversation_id, t.conversation_id,
                      t.previous_response_id, t.model, t.provider, t.status, t.started_at, t.completed_at, t.tokens,
                      t.content, t.conversation_form)
                     for _, t in round_ if t is not None]
            if turns:
                # Numbered and linked from the conversation as it stands before this
                # round, hence one turn per conversation per round.
                statements.append((
                    "INSERT INTO gateway_turns (response_id, conversation_id, turn_number, prior_response_id, "
                    "previous_response_id, model, provider, status, started_at, completed_at, tokens, content, "
                    "conversation_form) VALUES "
                    + ", ".join(["(?, ?, COALESCE((SELECT turns_recorded FROM gateway_conversations WHERE id = ?), 0)"
                                 " + 1, (SELECT last_response_id FROM gateway_conversations WHERE id = ?), "
                                 "?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(turns)), [v for row in turns for v in row]))
            # A new conversation is created with its first turn counted (and its topic
            # summary), an existing one gets its last-turn fields; an entry without a turn
            # (a failed first turn) only makes sure the conversation exists.
            counted = [(c.id, c.user_id, c.upstream_id, c.created_at,
                        t.completed_at if t else c.last_message_at, c.last_used_model, c.last_used_provider,
                        t.response_id if t else None, 1 if t else 0, 1 if t else 0, c.topic_summary,
                        int(c.generate_topic_summary)) for c, t in round_]
            statements.append((
                "INSERT INTO gateway_conversations AS c (id, user_id, upstream_id, created_at, last_message_at, "
                "last_used_model, last_used_provider, last_response_id, message_count, turns_recorded, "
                "topic_summary, generate_topic_summary) VALUES "
                + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(counted))
                + " ON CONFLICT (id) DO UPDATE SET last_message_at = excluded.last_message_at, "
                "last_used_model = excluded.last_used_model, last_used_provider = excluded.last_used_provider, "
                "last_response_id = excluded.last_response_id, message_count = c.message_count + 1, "
                "turns_recorded = c.turns_recorded + 1 WHERE excluded.message_count > 0",
                [v for row in counted for v in row]))
        statements.extend(extra)
        rows = await self._db.write(statements)
        self._committed(entries)
        return rows

    def _committed(self, entries: list[tuple[ConversationRecord, TurnRecord | None]]) -> None:
        """Bring cached records to what the batch just committed (in its order, as the
        statements numbered the turns); conversations not cached stay uncached."""
        for conversation, turn in entries:
            cached = self._conversations.get(conversation.id)
            if turn is None or cached is None:
                continue
            # Built field by field: `dataclasses.replace` costs several microseconds a call.
            self._turns.remember(turn.response_id, TurnRecord(
                turn.conversation_id, turn.response_id, turn.previous_response_id, turn.model, turn.provider,
                turn.status, turn.started_at, turn.completed_at, cached.turns_recorded + 1, cached.last_response_id,
                turn.tokens, None, turn.conversation_form))
            self._conversations[conversation.id] = ConversationRecord(
                cached.id, cached.user_id, cached.upstream_id, cached.created_at, turn.completed_at,
                conversation.last_used_model, conversation.last_used_provider, turn.response_id,
                cached.message_count + 1, cached.topic_summary, cached.generate_topic_summary,
                cached.turns_recorded + 1)

    def forget(self, conversation_id: str, response_ids: tuple[str, ...] = ()) -> None:
        """Drop cached records a change outside the writer made stale (a rename, a
        deleted conversation: `history.py`)."""
        self._conversations.pop(conversation_id, None)
        for response_id in response_ids:
            self._turns.pop(response_id, None)

    async def delete_turn(self, response_id: str) -> None:
        """Forget a deleted response. If it was the conversation's latest turn, the
        conversation continues from the turn before it (skipping deleted ones)."""
        turn = self._turns.pop(response_id, None)
        if turn is not None:
            self._conversations.pop(turn.conversation_id, None)
        async with self._db.transaction() as tx:
            turn = await tx.fetchone("SELECT conversation_id FROM gateway_turns WHERE response_id = :rid AND deleted = 0",
                                     {"rid": response_id})
            if turn is None:
                return
            # The conversation's row locked first (a portable no-op update; SQLite has one
            # writer anyway): a turn being recorded on another replica links to what
            # this transaction leaves as the latest turn, never to a row it removes.
            await tx.execute("UPDATE gateway_conversations SET message_count = message_count WHERE id = :cid",
                             {"cid": turn["conversation_id"]})
            # What it said goes with the response; the row stays while a later turn links
            # through it (the conversations endpoints walk those links: `history.py`).
            await tx.execute("UPDATE gateway_turns SET deleted = 1, content = NULL WHERE response_id = :rid",
                             {"rid": response_id})
            conversation = await tx.fetchone("SELECT last_response_id FROM gateway_conversations WHERE id = :cid",
                                             {"cid": turn["conversation_id"]})
            last = conversation["last_response_id"] if conversation else None
            unlinked = []   # deleted turns at the end of the chain: nothing will link to them
            while last is not None:
                row = await tx.fetchone("SELECT prior_response_id, deleted FROM gateway_turns WHERE response_id = :rid",
                                        {"rid": last})
                if row is None or not row["deleted"]:
                    break
                unlinked.append(last)
                last = row["prior_response_id"]
            await tx.execute("UPDATE gateway_conversations SET message_count = message_count - 1, last_response_id = :last "
                             "WHERE id = :cid", {"last": last, "cid": turn["conversation_id"]})
            for gone in unlinked:
                await tx.execute("DELETE FROM gateway_turns WHERE response_id = :rid", {"rid": gone})
        self._conversations.pop(turn["conversation_id"], None)


_Item = TypeVar("_Item")


def _chunks(rounds: list[list[_Item]]) -> list[list[_Item]]:
    """Each round cut into pieces of a power-of-two size: SQLite keeps a compiled
    statement per distinct text, and a multi-row statement for every batch size seen
    would keep hundreds of them resident (MiBs); these are a dozen."""
    pieces: list[list[_Item]] = []
    for round_ in rounds:
        start = 0
        while start < len(round_):
            size = 1 << ((len(round_) - start).bit_length() - 1)
            pieces.append(round_[start:start + size])
            start += size
    return pieces


def _rounds(entries: list[_Entry]) -> list[list[_Entry]]:
    """Split a batch so no conversation appears twice in a round (usually one round: a
    conversation's next turn waits for this one's record, unless a client sent two
    turns of one conversation at the same time)."""
    rounds: list[list[_Entry]] = []
    seen: dict[str, int] = {}
    for entry in entries:
        index = seen.get(entry[0].id, 0)
        seen[entry[0].id] = index + 1
        if index == len(rounds):
            rounds.append([])
        rounds[index].append(entry)
    return rounds
