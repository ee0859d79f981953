"""Group commit: batches form, intake waits when the queue is full, a bad entry does not
lose the others, and close() writes everything queued."""

from __future__ import annotations

import asyncio
import pytest

from gateway.storage.conversations import ConversationRepository
from gateway.storage.open import open_database
from gateway.storage.writer import TurnWriter
from tests.storage.test_conversations import conversation, turn


@pytest.fixture
async def repository(database_config):
    db = await open_database(database_config)
    yield ConversationRepository(db)
    await db.close()


@pytest.fixture
def batches(repository) -> list[int]:
    """The size of every batch the writer hands the repository, in order."""
    sizes: list[int] = []
    original = repository.save_many

    async def counting(entries, extra=()):
        sizes.append(len(entries))
        await original(entries, extra)

    repository.save_many = counting
    return sizes


async def test_turns_queued_together_are_written_in_one_batch(repository, batches):
    writer = TurnWriter(repository, linger=0.01)
    writer.start()
    done = [writer.submit(conversation(f"c{i}"), turn(f"r{i}", f"c{i}")) for i in range(30)]
    await asyncio.gather(*done)
    assert batches == [30]
    assert [(await repository.get(f"c{i}")).message_count for i in range(30)] == [1] * 30
    await writer.close()


async def test_turns_of_one_conversation_in_one_batch_still_number_up(repository):
    # Cannot happen through the pipeline (a conversation's next turn waits for this
    # one's record), but the writer must not lose or misnumber them if it does.
    writer = TurnWriter(repository, linger=0.01)
    writer.start()
    await asyncio.gather(*(writer.submit(conversation(), turn(f"r{i}")) for i in range(5)))
    assert (await repository.get("c1")).message_count == 5
    numbers = sorted([(await repository.find_turn(f"r{i}"))[0].turn_number for i in range(5)])
    assert numbers == [1, 2, 3, 4, 5]
    await writer.close()


async def test_full_queue_makes_new_turns_wait(repository):
    writer = TurnWriter(repository, max_queued=4, linger=0.05)
    for i in range(4):
        writer.submit(conversation(), turn(f"r{i}"))
    admitted = asyncio.ensure_future(writer.admit())
    await asyncio.sleep(0.01)
    assert not admitted.done()
    writer.start()
    await asyncio.wait_for(admitted, 2)
    await writer.close()
    assert (await repository.get("c1")).message_count == 4


async def test_one_bad_entry_does_not_lose_the_batch(repository):
    await repository.save(conversation(), turn("taken"))
    batches = []
    original = repository.save_many

    async def counting(entries, extra=()):
        batches.append([entry[1].response_id for entry in entries])
        await original(entries, extra)

    repository.save_many = counting
    writer = TurnWriter(repository, linger=0.01)
    writer.start()
    good = writer.submit(conversation(), turn("fresh"))
    bad = writer.submit(conversation(), turn("taken"))  # duplicate response id
    await good
    # SQLite: gateway_turns.response_id; PostgreSQL: gateway_turns_response_id_key.
    with pytest.raises(Exception, match="gateway_turns.response_id"):
        await bad
    # One batch failed as a whole, then each entry was written on its own.
    assert batches == [["fresh", "taken"], ["fresh"], ["taken"]]
    assert (await repository.find_turn("fresh")) is not None
    assert (await repository.get("c1")).message_count == 2
    await writer.close()


async def test_close_writes_what_is_queued(repository):
    writer = TurnWriter(repository, linger=0.5)
    writer.start()
    writer.submit(conversation(), turn("last"))
    await writer.close()
    assert (await repository.find_turn("last")) is not None


async def test_a_turn_alone_waits_for_no_batch_but_turns_under_load_do(repository, batches):
    """The clients of a batch wait for its commit: a turn that arrives alone is written at
    once (an idle gateway adds no linger to a turn), and after a batch of several the
    writer lingers again so the next batch forms."""
    writer = TurnWriter(repository, linger=30)  # far longer than the test: a linger would time out
    writer.start()
    await asyncio.wait_for(writer.submit(conversation("alone"), turn("r-alone", "alone")), timeout=10)
    await asyncio.wait_for(asyncio.gather(*[writer.submit(conversation(f"b{i}"), turn(f"rb{i}", f"b{i}"))
                                            for i in range(3)]), timeout=10)  # queued before the writer ran
    assert batches == [1, 3]
    writer._linger = 0.5  # under load now: the next wake-up lingers, so both go together
    first = writer.submit(conversation("l1"), turn("rl1", "l1"))
    for _ in range(3):
        await asyncio.sleep(0)  # the writer wakes and lingers instead of writing
    assert batches == [1, 3] and not first.done()
    second = writer.submit(conversation("l2"), turn("rl2", "l2"))
    await asyncio.gather(first, second)
    assert batches == [1, 3, 2]
    await writer.close()


async def test_charges_commit_with_the_batch_in_lock_order_then_the_participant_is_told(repository):
    """A turn's charge (its quota charge) is made statements by the writer's batch
    participant, in its batch's transaction, run sorted by their lock key; the
    participant's `committed` gets the charges of the entries committed, before their
    clients are told."""
    db = repository._db
    await db.execute("INSERT INTO gateway_token_usage (user_id, provider, model, day, input_tokens, output_tokens) "
                     "VALUES ('u', 'p', 'm', 'd', 0, 0)")
    add = "UPDATE gateway_token_usage SET input_tokens = input_tokens * 10 + :n"
    seen: list = []
    order: list = []

    class Participant:
        """Its charges are statements already (the quota service's are `quota.Charge`s)."""

        def statements(self, charges):
            return list(charges)

        async def committed(self, charges, rows):
            seen.append([key for key, _, _ in charges])
            order.append("after")

    writer = TurnWriter(repository, Participant(), linger=0.01)
    writer.start()
    await repository.save(conversation(), turn("taken"))
    done = [writer.submit(conversation(f"x{n}"), turn(f"rx{n}", f"x{n}"), charge=(f"k{n}", add, {"n": n}))
            for n in (3, 1, 2)]
    for future in done:
        future.add_done_callback(lambda _: order.append("told"))
    await asyncio.gather(*done)
    row = await db.fetchone("SELECT input_tokens FROM gateway_token_usage")
    assert row["input_tokens"] == 123     # applied as 1, 2, 3: key order, not submission order
    assert [sorted(keys) for keys in seen] == [["k1", "k2", "k3"]] and order.index("after") < order.index("told")
    # An entry that fails takes its charge with it.
    with pytest.raises(Exception):
        await writer.submit(conversation(), turn("taken"), charge=("k9", add, {"n": 9}))  # a duplicate
    assert (await db.fetchone("SELECT input_tokens FROM gateway_token_usage"))["input_tokens"] == 123
    assert len(seen) == 1
    await writer.close()


async def test_a_charge_needs_a_batch_participant(repository):
    """A writer made without a participant (the quota storage is another database) has
    no way to make a charge statements: refused when handed, nothing queued."""
    writer = TurnWriter(repository, linger=0.01)
    writer.start()
    with pytest.raises(ValueError):
        writer.submit(conversation(), turn("charged"), charge=("k", "SELECT 1", {}))
    await writer.close()
    assert (await repository.find_turn("charged")) is None
