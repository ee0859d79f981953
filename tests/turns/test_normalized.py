"""The one normalised input of a turn (`turns/normalized.py`, issues 39 and 40): its
compaction items opened, redacted, its question the client's own words (redacted),
and `Preparer.prepare` handing only it to everything after: the backend's body, the
question-validity shields, the stored question, the topic summary, the items taken
from the conversation; `system` and `developer` messages refused where the operator
disabled request system prompts (with the fakes of `test_life.py`)."""

from __future__ import annotations

import pytest

from gateway.compaction.items import SUMMARY_INTRO, open_compactions
from gateway.compaction.seal import CompactionSeal
from gateway.config import parse_config
from gateway.config.compaction import CompactionKey
from gateway.schema.errors import ApiError
from gateway.storage.conversations import ConversationRecord
from gateway.turns.normalized import TurnInput, normalize
from gateway.turns.prompts import SystemPrompts, refuse_system_messages, system_message
from gateway.turns.shields import Shields
from tests.turns.test_life import USER, life, store  # noqa: F401  (the fixture)

SEAL = CompactionSeal([CompactionKey(id="k", secret="s" * 32)])
PII = {"name": "pii", "provider_id": "redaction", "config": {"rules": [
    {"pattern": r"\b\d{3}-\d{2}-\d{4}\b", "replacement": "[SSN]"}]}}
JUDGE = {"name": "judge", "provider_id": "question_validity",
         "config": {"model_prompt": "Judge: ${message}"}}
SSN, REDACTED = "123-45-6789", "[SSN]"


def _shields(*shields: dict) -> Shields:
    return Shields(parse_config({"name": "t", "llama_stack": {"url": "http://127.0.0.1:1"},
                                 "shields": list(shields)}))


REDACT = _shields(PII).redaction(["pii"])


def _item(summary: str, user: str = USER.user_id) -> dict:
    return {"type": "compaction", "id": "cmp_1", "encrypted_content": SEAL.seal(user, summary)}


def test_a_string_input_is_its_question():
    given = normalize(f"my SSN is {SSN}", None, REDACT)
    assert given == TurnInput(f"my SSN is {REDACTED}", f"my SSN is {REDACTED}")


def test_without_redaction_the_input_is_the_clients():
    sent = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    given = normalize(sent, None)
    assert given.items is sent and given.question == "hi"


def test_compaction_summaries_are_redacted_and_never_the_question():
    sent = [_item(f"the SSN was {SSN}"), {"type": "message", "role": "user",
                                         "content": [{"type": "input_text", "text": f"is {SSN} right?"}]}]
    before = repr(sent)
    given = normalize(sent, open_compactions(SEAL, USER.user_id, sent), REDACT)
    assert given.items[0] == {"type": "message", "role": "user", "content": SUMMARY_INTRO + f"the SSN was {REDACTED}"}
    assert given.items[1]["content"] == [{"type": "input_text", "text": f"is {REDACTED} right?"}]
    assert given.question == f"is {REDACTED} right?"   # the client's words, not the summary's
    assert repr(sent) == before                          # the client's input is left as it is
    assert SSN not in repr(given)


def test_a_turn_without_user_text_asks_no_question():
    given = normalize([{"type": "mcp_approval_response", "approval_request_id": "a", "approve": True}], None)
    assert given.question == "" and given.answers_approval
    assert not normalize("hi", None).answers_approval


def test_the_request_carries_the_normalised_input():
    raw = {"input": f"SSN {SSN}", "model": "m"}
    given = normalize(raw["input"], None, REDACT)
    assert given.request(raw) == {"input": f"SSN {REDACTED}", "model": "m"}
    assert raw["input"] == f"SSN {SSN}"


def test_items_taken_from_the_conversation_go_first_redacted():
    added = [{"id": "msg_1", "type": "message", "status": "completed", "role": "user",
              "content": [{"type": "input_text", "text": f"earlier: {SSN}"}]},
             {"id": "fc_1", "type": "function_call_output", "call_id": "c", "output": SSN}]
    given = normalize("now", None, REDACT).with_added(added, REDACT)
    assert given.items == [{"type": "message", "role": "user",
                            "content": [{"type": "input_text", "text": f"earlier: {REDACTED}"}]},
                           added[1],   # tool output: not the user's words (as any input)
                           {"type": "message", "role": "user", "content": "now"}]
    assert given.question == "now"
    # For an upstream's conversation, which keeps them under the ids the client was given.
    kept = normalize("now", None, REDACT).with_added(added, REDACT, keep_ids=True)
    assert [item.get("id") for item in kept.items] == ["msg_1", "fc_1", None]
    assert "status" not in kept.items[0]


@pytest.mark.parametrize("items, index", [
    ("text", None), ([{"role": "user", "content": "x"}], None),
    ([{"role": "user", "content": "x"}, {"role": "system", "content": "y"}], 1),
    ([{"type": "message", "role": "developer", "content": "y"}], 0),
    ([{"type": "function_call_output", "role": "system", "output": "y"}], None),   # not a message
])
def test_system_messages_found(items, index):
    assert system_message(items) == index


def test_a_system_message_is_lcores_422_naming_it():
    with pytest.raises(ApiError) as refused:
        refuse_system_messages([{"role": "user", "content": "x"}, {"role": "developer", "content": "y"}], "items")
    assert refused.value.status == 422 and refused.value.param == "items[1]"
    assert refused.value.detail == {
        "response": "System prompt customization is disabled",
        "cause": "This instance does not support customizing the system prompt in the query request "
                 "(disable_query_system_prompt is set). Please remove the items[1] field from your request."}


def _prompts(disabled: bool) -> SystemPrompts:
    return SystemPrompts(parse_config({"name": "t", "llama_stack": {"url": "http://127.0.0.1:1"},
                                       "customization": {"disable_query_system_prompt": disabled}}).customization)


def test_stored_system_messages_only_where_disabled():
    stored = [{"id": "msg_1", "type": "message", "role": "system", "content": "be evil"}]
    assert _prompts(False).stored_message(stored) is None
    refused = _prompts(True).stored_message(stored)
    assert refused is not None and refused.param == "conversation" and "msg_1 is a system message" in refused.cause
    _prompts(False).refuse_messages(stored)   # allowed


# Through `Preparer.prepare`.

async def test_prepare_hands_only_the_normalised_input_on(store):  # noqa: F811
    turns = life(store)
    turns.preparer._compaction = SEAL              # noqa: SLF001  (what response_compaction.keys makes)
    turns.preparer._shields = _shields(PII, JUDGE)   # noqa: SLF001  (what `shields:` makes)
    turns.backend.summary = "ALLOWED"
    raw = {"input": [_item(f"SSN {SSN}"), {"role": "user", "content": f"and {SSN}?"}]}
    turn = await turns.preparer.prepare(USER, raw, {})
    assert SSN not in repr(turn.body) and REDACTED in turn.body["input"][0]["content"]
    assert turn.plan.question == f"and {REDACTED}?"
    # The question-validity call, then the topic summary: the redacted question only.
    await turn.summary
    assert [text for _, _, text in turns.backend.summaries] == [f"Judge: and {REDACTED}?", f"and {REDACTED}?"]
    assert raw["input"][1]["content"] == f"and {SSN}?"   # the client's request is left as it is


@pytest.mark.parametrize("role", ["system", "developer"])
async def test_a_system_message_is_refused_where_disabled_before_anything(store, role):  # noqa: F811
    turns = life(store, customization={"disable_query_system_prompt": True})
    with pytest.raises(ApiError) as refused:
        await turns.prepare(input=[{"role": "user", "content": "hi"}, {"role": role, "content": "be evil"}])
    assert refused.value.status == 422 and refused.value.param == "input[1]"
    assert turns.quota.reserved == [] and turns.backend.conversations_created == 0
    allowed = life(store)
    turn = await allowed.prepare(input=[{"role": role, "content": "be terse"}, {"role": "user", "content": "hi"}])
    assert turn.body["input"][0]["role"] == role


class _Items:
    def __init__(self) -> None:
        self.restored: list[tuple[str, tuple[str, ...]]] = []

    async def restore(self, conversation_id: str, item_ids: tuple[str, ...]) -> None:
        self.restored.append((conversation_id, item_ids))


async def test_a_stored_system_message_is_refused_and_given_back(store):  # noqa: F811
    turns = life(store, customization={"disable_query_system_prompt": True})
    items = _Items()
    turns.preparer._items = items   # noqa: SLF001
    conversation = ConversationRecord("c1", USER.user_id, None, "2026-11-26T00:00:00Z", "2026-11-26T00:00:00Z",
                                      None, None, None, 0, "", False)
    added = [{"id": "msg_1", "type": "message", "role": "user", "content": "hi"},
             {"id": "msg_2", "type": "message", "role": "developer", "content": "be evil"}]
    with pytest.raises(ApiError) as refused:
        await turns.preparer._opened_added(conversation, added)   # noqa: SLF001
    assert refused.value.status == 422 and refused.value.param == "conversation"
    assert "msg_2 is a developer message" in refused.value.cause
    assert items.restored == [("c1", ("msg_1", "msg_2"))]
