"""What the gateway's own turn store keeps of a turn (issue 22): the user's question,
the answer's text and the turn's tool items, as one JSON text written with the turn's
row by its settlement (`settle.py`), for every endpoint and both backends.

It is what LCORE's `chat_history` (`/v1` and `/v2/conversations`) and transcripts are
made of; provider, model and times are the row's own columns, the topic summary the
conversation's. Kept raw and small on the hot path (one pass over the output, one
`orjson.dumps`): the LCORE shapes are made when someone reads them
(`gateway/http/conversations.py`), not for every turn.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.schema.json_types import JsonObject

# Output items that are not tool work: the answer (its text is kept) and reasoning.
_NOT_TOOLS = ("message", "reasoning")
# Keys of the stored JSON (short: they are repeated in every row).
QUESTION, ANSWER, ITEMS = "q", "a", "i"
# The form the turn showed `conversation` in (`schema/ids.py`'s `sent_form`), so
# `GET /v1/responses/{id}` shows it so again and a turn continuing from it by
# `previous_response_id` (or forking from it) answers in it: 1 OpenAI's `{"id": ...}`
# (issue 23), 2 the bare id (LCORE's clients); absent for the default `conv_` string.
# The turn's row keeps the same code in its `conversation_form` column, which is what
# is read (migration 11 filled it from this key); the key stays for a replica of an
# older version reading rows this one writes.
FORM = "f"
_FORMS = {"object": 1, "bare": 2}
_NAMES = {code: name for name, code in _FORMS.items()}


def form_code(form: str) -> int:
    """The turn row's `conversation_form` for a form (0: the default `conv_` string)."""
    return _FORMS.get(form, 0)


def form_name(code: int | None) -> str | None:
    """The form a turn row's `conversation_form` names (None: a turn recorded before the
    turn store, which knows none)."""
    return None if code is None else _NAMES.get(code, "string")


def turn_content(question: str, response: dict[str, Any], form: str = "string") -> str:
    """The stored content of a turn whose terminal response object is `response`."""
    answer, items = answer_and_tools(response)
    content: dict[str, Any] = {QUESTION: question, ANSWER: answer}
    if items:
        content[ITEMS] = items
    if form in _FORMS:
        content[FORM] = _FORMS[form]
    return orjson.dumps(content).decode()


def answer_and_tools(response: JsonObject) -> tuple[str, list[JsonObject]]:
    """The answer's text and the tool items of a response object, in one pass."""
    texts: list[str] = []
    refusals: list[str] = []
    items: list[dict[str, Any]] = []
    for item in response.get("output") or ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict):
                    if part.get("type") == "output_text":
                        texts.append(part.get("text") or "")
                    elif part.get("type") == "refusal":
                        refusals.append(part.get("refusal") or "")
        elif kind not in _NOT_TOOLS:
            items.append(item)
    # A refusal stands for the answer when there is no text (as LCORE's legacy answer).
    return "".join(texts) or "".join(refusals), items


def read_content(text: str | None) -> tuple[str, str, list[JsonObject]]:
    """(question, answer, tool items) of a stored content; empty for a row without one
    (a turn recorded before the turn store existed)."""
    if not text:
        return "", "", []
    try:
        content = orjson.loads(text)
    except orjson.JSONDecodeError:
        return "", "", []
    if not isinstance(content, dict):
        return "", "", []
    items = content.get(ITEMS)
    return (str(content.get(QUESTION) or ""), str(content.get(ANSWER) or ""),
            [item for item in items if isinstance(item, dict)] if isinstance(items, list) else [])
