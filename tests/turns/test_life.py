"""A turn's life with a fake backend and a fake quota, over a real SQLite turn store:
`prepare()` refuses before creating anything, the runner settles once before the
answer for each of its sinks (a JSON body, a stream of frames, a sink that ends a
stopped turn itself), an abandoned turn is charged in full, and a record that cannot be
committed is the documented error (LCORE's `database_error`, or `response.failed`)."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import orjson
import pytest

from gateway.config import parse_config
from gateway.config.database import DatabaseConfig
from gateway.identity import Identity
from gateway.quota.reservation import Reservation
from gateway.schema.errors import ApiError, quota_exceeded
from gateway.storage.conversations import ConversationRepository
from gateway.storage.open import open_database
from gateway.storage.writer import TurnWriter
from gateway.streaming.events import Event
from gateway.streaming.rewriter import StreamRewriter
from gateway.turns.tools import ConfiguredTools
from gateway.turns.body import backend_body
from gateway.turns.hooks import Hooks, TurnHooks
from gateway.turns.in_progress import InProgress
from gateway.turns.backend_choice import BackendSelector
from gateway.turns.prepare import Preparer
from gateway.turns.run import BodySink, FrameSink, Runner
from gateway.turns.owned import OwnedTurns
from gateway.turns.settle import Settler
from gateway.turns.turn import Plan, Turn
from gateway.upstream.catalog import ModelInfo

MODEL = ModelInfo(id="fake/model", model_type="llm", provider_id="fake", provider_resource_id="model", raw={},
                  display_id="model")
USER = Identity(user_id="alice", username="alice")
CONFIG = {"name": "life", "llama_stack": {"url": "http://127.0.0.1:1"}}
USAGE = {"input_tokens": 30, "output_tokens": 12, "total_tokens": 42}
RESERVED = 100


def _response(status: str = "completed", usage: dict | None = USAGE) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 1, "status": status, "model": MODEL.id,
            "output": [], "usage": usage, "error": None, "incomplete_details": None}


def _events() -> list[list[Event]]:
    """Three upstream reads: created, a delta, completed."""
    created = {"type": "response.created", "sequence_number": 0, "response": _response("in_progress", None)}
    delta = {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1", "output_index": 0,
             "content_index": 0, "delta": "hi", "logprobs": []}
    completed = {"type": "response.completed", "sequence_number": 2, "response": _response()}
    return [[Event.build(created)], [Event.build(delta)], [Event.build(completed)]]


class FakeBackend:
    """The `Backend` protocol, scripted: what it was asked is kept."""

    def __init__(self, *, refuse: ApiError | None = None, reads: list[list[Event]] | None = None,
                 stall: bool = False):
        self.refuse = refuse
        self.reads = reads if reads is not None else _events()
        self.stall = stall             # after the first read, wait forever (a client leaves)
        self.conversations_created = 0
        self.responded = 0
        self.summaries: list[tuple[str, str, str]] = []   # (model, instructions, text) asked
        self.summary: str | BaseException = " Fake Topic Title \n"
        self.summary_started = asyncio.Event()
        self.summary_gate: asyncio.Event | None = None     # set: the summary waits for it

    async def accept(self, raw: Any, refusal: ApiError) -> Any:
        raise refusal

    async def check(self, raw: dict[str, Any], tools: list[dict[str, Any]] | None) -> None:
        if self.refuse is not None:
            raise self.refuse

    def body(self, raw: dict[str, Any], request: Any, plan: Plan, tools: list[dict[str, Any]] | None) -> dict:
        return backend_body(raw, request, plan, tools, parse_config(CONFIG).inference)

    async def create_conversation(self) -> str | None:
        self.conversations_created += 1
        return None

    async def append_items(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        raise AssertionError("nothing is appended")

    async def respond(self, turn: Turn) -> dict[str, Any]:
        self.responded += 1
        return _response()

    def open(self, turn: Turn) -> Any:
        @asynccontextmanager
        async def opened() -> AsyncIterator[AsyncIterator[list[Event]]]:
            async def reads() -> AsyncIterator[list[Event]]:
                for index, events in enumerate(self.reads):
                    yield events
                    if self.stall and index == 0:
                        await asyncio.Event().wait()
            yield reads()
        return opened()

    def feed(self, rewriter: StreamRewriter) -> Any:
        return rewriter.feed_events

    async def summarize(self, model: str, instructions: str, text: str) -> str:
        self.summaries.append((model, instructions, text))
        self.summary_started.set()
        if self.summary_gate is not None:
            await self.summary_gate.wait()
        if isinstance(self.summary, BaseException):
            raise self.summary
        return self.summary


class FakeQuota:
    """A quota with one balance: what was reserved, charged, released and forgotten."""

    enabled = True
    shares_turn_database = False   # the charge is written on its own, then the record

    def __init__(self) -> None:
        self.reserved: list[Reservation] = []
        self.written: list[tuple[str, int]] = []
        self.released: list[int] = []
        self.forgotten = 0
        self.balance = 1000
        self.extended: list[int] = []

    async def reserve(self, identity: Identity, raw: Any) -> Reservation:
        reservation = Reservation(user_id=identity.user_id, tokens=RESERVED, pairs=(),
                                  output=raw.get("max_output_tokens") or 0)
        self.reserved.append(reservation)
        return reservation

    async def extend(self, reservation: Reservation, tokens: int) -> None:
        if self.balance - reservation.tokens < tokens:
            raise quota_exceeded(f"User {reservation.user_id} has no available tokens", 60)
        self.extended.append(tokens)
        reservation.tokens += tokens

    async def release(self, reservation: Reservation, charge: int = 0) -> None:
        self.released.append(charge)
        self.balance -= charge

    def charge(self, reservation: Reservation, input_tokens: int, output_tokens: int, model: str,
               provider: str | None) -> tuple[str, int]:
        return (model, input_tokens + output_tokens)

    async def write(self, charge: tuple[str, int]) -> None:
        self.written.append(charge)
        self.balance -= charge[1]

    def forget(self, reservation: Reservation | None) -> None:
        self.forgotten += 1

    def settled(self, reservation: Reservation) -> dict[str, int] | None:
        return None

    async def available(self, user_id: str) -> dict[str, int]:
        return {"daily": self.balance}


class FakeCatalog:
    async def find(self, model_id: str) -> ModelInfo | None:
        return MODEL if model_id in (MODEL.id, MODEL.display_id) else None

    async def first_llm(self) -> ModelInfo | None:
        return MODEL


class Life:
    """Everything a turn's life needs, around one fake backend."""

    def __init__(self, backend: FakeBackend, repository: ConversationRepository, writer: TurnWriter,
                 customization: dict[str, Any] | None = None):
        config = parse_config({**CONFIG, "customization": customization or {}})
        self.backend = backend
        self.quota = FakeQuota()
        self.repository = repository
        self.settler = Settler(writer, self.quota)  # type: ignore[arg-type]
        tools = ConfiguredTools(config)
        selector = BackendSelector(backend, backend, _Forward())  # type: ignore[arg-type]
        self.preparer = Preparer(config, OwnedTurns(repository, self.settler), writer, FakeCatalog(),  # type: ignore[arg-type]
                                 self.quota, tools, selector)
        self.seen: list[str] = []
        self.runner = Runner(self.settler, tools.labels, tools.redactor, Hooks([_Broken(), _Seen(self.seen)]))

    async def prepare(self, **raw: Any) -> Turn:
        return await self.preparer.prepare(USER, {"input": "hello", **raw}, {})


class _Seen(TurnHooks):
    def __init__(self, seen: list[str]):
        self.seen = seen

    def first_event(self, turn: Turn) -> None:
        self.seen.append("first_event")

    def settled(self, turn: Turn) -> None:
        result = turn.outcome.result
        self.seen.append(f"settled {result and result['status']}")

    def finished(self, turn: Turn, error: BaseException | None) -> None:
        self.seen.append(f"finished {type(error).__name__ if error else ''}".strip())


class _Broken(TurnHooks):
    """An observer that fails at every moment: the turn goes on regardless."""

    def first_event(self, turn: Turn) -> None:
        raise RuntimeError("observer bug")

    settled = first_event

    def finished(self, turn: Turn, error: BaseException | None) -> None:
        raise RuntimeError("observer bug")


class _Forward:
    """Capabilities that always choose the first backend."""

    async def uses_engine(self) -> bool:
        return False


@pytest.fixture
async def store(tmp_path) -> AsyncIterator[tuple[ConversationRepository, TurnWriter]]:
    db = await open_database(DatabaseConfig.model_validate({"sqlite": {"db_path": str(tmp_path / "g.db")}}))
    repository = ConversationRepository(db)
    writer = TurnWriter(repository)
    writer.start()
    yield repository, writer
    await writer.close()
    await db.close()


def life(store: tuple[ConversationRepository, TurnWriter], customization: dict[str, Any] | None = None,
         **backend: Any) -> Life:
    return Life(FakeBackend(**backend), *store, customization=customization)


class Body(BodySink):
    def __init__(self) -> None:
        self.responses: list[dict[str, Any]] = []
        self.stops: list[BaseException] = []

    async def body(self, response: dict[str, Any]) -> None:
        self.responses.append(response)

    async def stopped(self, turn: Turn, exc: BaseException) -> None:
        self.stops.append(exc)


class Frames(FrameSink):
    def __init__(self, life: Life, turn: Turn) -> None:
        super().__init__(life.runner.rewriter(turn))
        self.calls: list[str] = []
        self.frames = b""

    async def start(self) -> None:
        self.calls.append("start")

    async def write(self, frames: bytes) -> None:
        self.calls.append("write")
        self.frames += frames

    async def end(self, frames: bytes) -> None:
        self.calls.append("end")
        self.frames += frames

    def events(self) -> list[dict[str, Any]]:
        return [orjson.loads(block.split(b"data: ", 1)[1]) for block in self.frames.split(b"\n\n")
                if b"data: {" in block]


async def _conversation_count(repository: ConversationRepository) -> int:
    row = await repository._db.fetchone("SELECT count(*) AS n FROM gateway_conversations")  # noqa: SLF001
    assert row is not None
    return int(row["n"])


async def test_prepare_refuses_before_creating_anything(store):
    turns = life(store, refuse=ApiError(422, "Unprocessable", "no", code="bad"))
    with pytest.raises(ApiError) as refused:
        await turns.prepare()
    assert refused.value.status == 422
    assert turns.backend.conversations_created == 0
    assert await _conversation_count(turns.repository) == 0
    assert turns.quota.released == [0]   # the reservation given back, nothing charged


async def test_a_json_turn_is_settled_once_before_its_body(store):
    turns = life(store)
    turn = await turns.prepare()
    sink = Body()
    await turns.runner.run(turn, sink)
    [body] = sink.responses
    assert body["available_quotas"] == {"daily": 1000 - 42}
    assert body["conversation"] == turn.plan.conversation
    assert turns.quota.written == [(MODEL.id, 42)]
    record = await turns.repository.find_turn("resp_1")
    assert record is not None and record[1].user_id == "alice"
    # Settling again (a caller that settles what the runner settled) charges nothing more.
    assert await turns.settler.settle(turn) == {"daily": 958}
    await turns.settler.drain()
    assert turns.quota.written == [(MODEL.id, 42)] and turns.quota.released == []
    # Each named moment once, in order, although another observer raised at each.
    assert turns.seen == ["first_event", "settled completed", "finished"]


async def test_a_stream_starts_once_and_ends_with_the_settled_terminal(store):
    turns = life(store)
    turn = await turns.prepare(stream=True)
    sink = Frames(turns, turn)
    await turns.runner.run(turn, sink)
    assert sink.calls == ["start", "write", "write", "end"]
    events = sink.events()
    assert [event["type"] for event in events] == ["response.created", "response.output_text.delta",
                                                  "response.completed"]
    assert events[-1]["response"]["available_quotas"] == {"daily": 958}
    assert sink.frames.endswith(b"data: [DONE]\n\n")
    assert turns.quota.written == [(MODEL.id, 42)]
    assert await turns.repository.find_turn("resp_1") is not None


async def test_a_stream_whose_client_leaves_is_abandoned_and_charged_in_full(store):
    turns = life(store, stall=True)
    turn = await turns.prepare(stream=True)
    sink = Frames(turns, turn)
    running = asyncio.ensure_future(turns.runner.run(turn, sink))
    while "write" not in sink.calls and "start" not in sink.calls:
        await asyncio.sleep(0.001)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await turns.settler.drain()
    assert turn.outcome.abandoned
    assert turns.seen == ["first_event", "finished CancelledError"]
    assert turns.quota.released == [RESERVED]   # no usage reported: its reservation, in full
    assert turns.quota.written == []


async def test_a_stopped_turn_that_its_sink_ends_is_charged_and_recorded(store):
    """A background run's sink: cancelled, it settles the turn with the response so far."""
    turns = life(store, stall=True)
    turn = await turns.prepare(stream=True)

    class EndsItself(Frames):
        async def stopped(self, turn: Turn, exc: BaseException) -> None:
            self.calls.append("stopped")
            await turns.runner.settle(turn, {**_response("cancelled", None)})

    sink = EndsItself(turns, turn)
    running = asyncio.ensure_future(turns.runner.run(turn, sink))
    while "start" not in sink.calls:
        await asyncio.sleep(0.001)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await turns.settler.drain()
    assert sink.calls[-1] == "stopped"
    assert turns.seen == ["first_event", "settled cancelled", "finished CancelledError"]
    assert turns.quota.written == [(MODEL.id, RESERVED)]   # abandoned without usage: the reservation
    assert turns.quota.released == []                      # settled once: finish() left it alone
    conversation = await turns.repository.get(turn.plan.conversation_id or "")
    assert conversation is not None and conversation.user_id == "alice"


async def test_a_record_that_cannot_be_committed_is_the_database_error(store):
    turns = life(store)
    repository, _ = store

    async def failing(entries, extra=()):
        raise RuntimeError("disk full")

    repository.save_many = failing  # type: ignore[method-assign]
    turn = await turns.prepare()
    sink = Body()
    with pytest.raises(ApiError) as refused:
        await turns.runner.run(turn, sink)
    assert (refused.value.status, refused.value.cause) == (500, "Failed to query the database")
    assert sink.responses == [] and len(sink.stops) == 1
    assert turns.quota.forgotten >= 1   # what the ledger assumed was not written

    streamed = await turns.prepare(stream=True)
    frames = Frames(turns, streamed)
    await turns.runner.run(streamed, frames)
    terminal = frames.events()[-1]
    assert terminal["type"] == "response.failed"
    assert terminal["response"]["error"]["message"] == "Failed to query the database"


async def test_an_engine_turn_stopped_mid_loop_is_charged_what_it_used(store):
    """Issue 19: the engine reports its rounds' usage; a stopped turn is charged its
    finished rounds plus the round in flight, never less than it reserved."""
    turns = life(store, stall=True)
    turn = await turns.prepare(stream=True, max_output_tokens=10)
    reservation = turn.plan.reservation
    assert reservation is not None and reservation.output == 10
    turn.round_ended({"input_tokens": 300, "output_tokens": 40})
    assert await turn.admit_round(200)   # 340 used + 210 for the round, beyond the reservation
    assert turns.quota.extended == [340 + 210 - RESERVED] and reservation.tokens == 550
    assert turn.stopped_charge() == 550
    sink = Frames(turns, turn)
    running = asyncio.ensure_future(turns.runner.run(turn, sink))
    while "start" not in sink.calls:
        await asyncio.sleep(0.001)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await turns.settler.drain()
    assert turns.quota.released == [550]


async def test_a_round_the_balance_cannot_cover_is_refused(store):
    turns = life(store)
    turn = await turns.prepare(max_output_tokens=10)
    turn.round_ended({"input_tokens": 900, "output_tokens": 90})
    assert not await turn.admit_round(500)   # the fake balance is 1000
    assert turns.quota.extended == []


async def test_responses_in_progress_per_user_are_counted_until_they_end(store):
    turns = life(store, stall=True)
    turns.preparer.in_progress = InProgress(1)
    turn = await turns.prepare(stream=True)
    with pytest.raises(ApiError) as refused:
        await turns.prepare(stream=True)
    assert refused.value.status == 429 and refused.value.headers["Retry-After"] == "1"
    assert refused.value.cause == f"User {USER.user_id} has 1 responses in progress (limit 1)"
    assert len(turns.quota.reserved) == 1   # nothing reserved for the refused one
    sink = Frames(turns, turn)
    running = asyncio.ensure_future(turns.runner.run(turn, sink))
    while "start" not in sink.calls:
        await asyncio.sleep(0.001)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert turns.preparer.in_progress.running(USER.user_id) == 0
    await turns.settler.drain()


def test_loop_limits_are_the_defaults_or_the_clients_capped():
    from gateway.turns.body import loop_limit

    assert loop_limit(None, 10, 50) == 10 and loop_limit(7, 10, 50) == 7 and loop_limit(500, 10, 50) == 50
    assert loop_limit(True, 10, 50) == 10 and loop_limit(0, 10, 50) == 10
