"""Guardrails in the local engine: a request's `guardrails` (Llama Stack's field: ids, or
`{"type": <id>}`) checked by an OpenAI-compatible `POST /v1/moderations`, each id
being the moderation `model` (Llama Stack maps a guardrail to a shield's model the
same way; spec 000 "Guardrail Integration").

- **Input**: the request's own input text (its messages' text and the function
  outputs it returns; not the history, checked in its own turn) is checked once,
  before the response starts. Flagged: the response is a refusal and nothing else
  (the model is not asked, MCP servers are not listed).
- **Output**: `guarded()` wraps the model (an async iterator of chat chunks) so that
  nothing reaches the emitter, and so the client, before it was checked: chunks are
  held until the answer reaches a sentence end (or `output_window` characters), then
  the round's whole answer so far is checked and the held chunks released. Tool-call
  chunks hold everything after them to the end of the round, so a violation never
  meets a call already shown. Flagged: the upstream stream is closed and the round's
  answer ends with a refusal part (`response.refusal.delta|done`, in a message of its
  own after the text already released, which had passed its checks); the response
  then completes, as Llama Stack's does.
- **Moderation unreachable** (no connection, no answer within `guardrails.timeout`, a
  5xx, an answer of another shape): fail closed by default (input: 503 before
  anything is streamed; output: the held text is never shown and the response ends
  `response.failed`), or, with `guardrails.fail_open`, the text goes through unchecked
  (logged). A 4xx (an unknown guardrail id) is the request's error: 422 (`param:
  guardrails`), or `response.failed` if it only shows once the answer streams.
"""

from __future__ import annotations

import asyncio
import logging
import re
from contextlib import aclosing
from typing import Any, AsyncGenerator, Iterable

import orjson

from gateway.config import GuardrailsConfig
from gateway.engine.chat_stream import Chunk
from gateway.engine.json_service import JsonService, ServiceRefused, ServiceUnavailable
from gateway.engine.loop import Model
from gateway.engine.plan import Plan
from gateway.schema.errors import ApiError, invalid_attribute
from gateway.upstream.breaker import DEFAULT_CIRCUIT, CircuitBreaker
from gateway.upstream.client import UpstreamClient

log = logging.getLogger("gateway.engine.guardrails")

SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")
MAX_SENTENCE = 1000  # per-sentence checking still checks a text without sentence ends this often
DEFAULT_MESSAGE = "Content blocked by safety guardrails"
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})


def guardrail_ids(value: Any) -> list[str]:
    """The request's `guardrails` as moderation model ids; 422 for any other shape."""
    ids = []
    for entry in value or ():
        if isinstance(entry, dict) and set(entry) == {"type"}:
            entry = entry["type"]
        if not isinstance(entry, str) or not entry.strip():
            raise invalid_attribute("Each guardrail must be a non-empty id string or {\"type\": \"<id>\"}",
                                    param="guardrails", code="invalid_guardrail")
        ids.append(entry)
    return list(dict.fromkeys(ids))


def input_text(items: Iterable[dict[str, Any]]) -> str:
    """The text of a request's input items that moderation reads."""
    texts = []
    for item in items:
        if item.get("type") == "message":
            content = item.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts += [str(part.get("text") or "") for part in content
                          if isinstance(part, dict) and part.get("type") in _TEXT_PARTS]
        elif item.get("type") == "function_call_output" and isinstance(item.get("output"), str):
            texts.append(item["output"])
    return "\n".join(text for text in texts if text)


def moderation_unavailable(cause: str) -> ApiError:
    return ApiError(503, "Unable to connect to the moderation service", cause, code="moderation_unavailable")


class Moderation:
    """The moderation endpoint and the operator's policy for it."""

    def __init__(self, service: JsonService, config: GuardrailsConfig):
        self._service = service
        self.fail_open = config.fail_open
        self.window = config.output_window

    @classmethod
    def of(cls, config: GuardrailsConfig, upstream: UpstreamClient,
           circuit: tuple[int, float] = DEFAULT_CIRCUIT) -> "Moderation":
        """The configured endpoint, or the upstream's `/v1/moderations`."""
        name = "The moderation service"
        service = (JsonService.at(config.moderation_url, config.api_key, config.timeout, name, circuit)
                   if config.moderation_url else JsonService(upstream, "/v1/moderations", config.timeout, name))
        return cls(service, config)

    def breakers(self) -> list[CircuitBreaker]:
        """The moderation endpoint's own circuit (none on the upstream's endpoint)."""
        return self._service.breakers()

    async def start(self) -> None:
        await self._service.start()

    async def close(self) -> None:
        await self._service.close()

    async def check(self, ids: list[str], text: str) -> str | None:
        """The violation message (None: every guardrail passed). Raises ApiError when
        the check cannot be made and the policy is to fail closed, or a guardrail is
        refused."""
        answers = await asyncio.gather(*(self._verdict(guardrail, text) for guardrail in ids),
                                       return_exceptions=True)
        for answer in answers:
            if isinstance(answer, ServiceRefused):
                raise invalid_attribute(f"The moderation service refused the guardrails: {answer}",
                                        param="guardrails", code="invalid_guardrail")
        for answer in answers:
            if isinstance(answer, ServiceUnavailable):
                if not self.fail_open:
                    raise moderation_unavailable(str(answer))
                log.warning("guardrails not checked (fail_open): %s", answer)
            elif isinstance(answer, BaseException):
                raise answer
            elif answer is not None:
                return answer
        return None

    async def _verdict(self, guardrail: str, text: str) -> str | None:
        answer = await self._service.post({"input": text, "model": guardrail})
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list) or not all(isinstance(result, dict) for result in results):
            raise ServiceUnavailable("The moderation service answered without a `results` list")
        for result in results:
            if result.get("flagged"):
                return _message(result)
        return None


def _message(result: dict[str, Any]) -> str:
    """What the client reads, as Llama Stack words it."""
    message = str(result.get("user_message") or DEFAULT_MESSAGE)
    categories = result.get("categories")
    flagged = [name for name, on in categories.items() if on] if isinstance(categories, dict) else []
    return f"{message} (flagged for: {', '.join(flagged)})" if flagged else message


def refusal_chunk(message: str) -> dict[str, Any]:
    """A chat chunk whose answer is a refusal (the emitter makes it a refusal part)."""
    return {"choices": [{"index": 0, "delta": {"refusal": message}, "finish_reason": "stop"}]}


def refusing(message: str) -> Model:
    """A model that refuses at once: the response to flagged input."""

    async def run(chat: dict[str, Any]) -> AsyncGenerator[list[Chunk], None]:
        yield [refusal_chunk(message)]

    return run


def _text_of(chunk: Chunk) -> tuple[str, bool]:
    """The text a chunk would show the client, and whether it carries a tool call."""
    if chunk.__class__ is list:
        return "".join(orjson.loads(literal) for literal in chunk), False
    assert isinstance(chunk, dict)
    text, call = [], False
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict):
            text += [value for key in ("reasoning_content", "reasoning", "content", "refusal")
                     if isinstance(value := delta.get(key), str)]
            call = call or bool(delta.get("tool_calls"))
    return "".join(text), call


async def with_guardrails(model: Model, moderation: Moderation, ids: list[str], inputs: list[dict[str, Any]],
                          plan: Plan) -> Model:
    """The model a response runs under its guardrails: the input is checked now
    (spec 000: before `response.in_progress`); flagged, a model that only refuses
    (and no prelude: nothing else runs), else `model` behind the output gate."""
    if not ids:
        return model
    text = input_text(inputs)
    violation = await moderation.check(ids, text) if text else None
    if violation is None:
        return guarded(model, moderation, ids)
    log.info("guardrails %s flagged the input", ids)
    plan.prelude = None
    return refusing(violation)


def guarded(model: Model, moderation: Moderation, ids: list[str]) -> Model:
    """`model` with every round's answer checked before it is passed on (module doc)."""
    window = moderation.window

    async def run(chat: dict[str, Any]) -> AsyncGenerator[list[Chunk], None]:
        answer: list[str] = []  # the round's text so far, released and held
        pending = 0             # characters of it not checked yet
        ended = False           # a sentence ended in them
        last = ""               # the character before the newest piece (". " may be split)
        held: list[Chunk] = []
        to_the_end = False      # a tool call came: hold the rest of the round
        async with aclosing(model(chat)) as reads:
            async for chunks in reads:
                for chunk in chunks:
                    text, call = _text_of(chunk)
                    held.append(chunk)
                    to_the_end = to_the_end or call
                    if text:
                        answer.append(text)
                        pending += len(text)
                        ended = ended or window is None and SENTENCE_END.search(last + text) is not None
                        last = text[-1]
                due = pending >= window if window is not None else ended or pending >= MAX_SENTENCE
                if not held or to_the_end or pending and not due:
                    continue
                if pending:
                    violation = await moderation.check(ids, "".join(answer))
                    if violation is not None:
                        log.info("guardrails %s flagged an answer", ids)
                        yield [refusal_chunk(violation)]
                        return  # closes the upstream stream
                    pending, ended = 0, False
                held, released = [], held
                yield released
        if pending:
            violation = await moderation.check(ids, "".join(answer))
            if violation is not None:
                log.info("guardrails %s flagged an answer", ids)
                # The round's usage still counts.
                usage = [{"choices": [], "usage": chunk["usage"]} for chunk in held
                         if isinstance(chunk, dict) and chunk.get("usage")]
                yield [refusal_chunk(violation), *usage]
                return
        if held:
            yield held

    return run
