"""One Chat Completions stream read into the emitter (sans-I/O).

`feed()` takes each decoded chunk: `reasoning_content` (vLLM, DeepSeek; `reasoning` on
some servers) becomes a reasoning item, `content` text, `refusal` a refusal part, and
`tool_calls` pieces function calls keyed by their `index`. The round is over only when
the stream ends (`[DONE]` or EOF), never at `finish_reason`: the usage chunk
(`stream_options.include_usage`) comes after it.
"""

from __future__ import annotations

from typing import Any

from gateway.engine.chat_stream import Chunk
from gateway.engine.emitter import Emitter
from gateway.engine.translate import usage_of
from gateway.schema.errors import ApiError, upstream_bad_stream, upstream_unavailable
from gateway.schema.ids import new_item_id
from gateway.schema.json_types import ResponseUsage


class UpstreamChatError(Exception):
    """The upstream reported an error inside its stream."""


CUT = "The upstream stream ended without a terminal event."


class UpstreamStreamLost(UpstreamChatError):
    """The round's stream was lost before the upstream reported usage: it broke (reset,
    idle gap), ended without its end (no `finish_reason`, no `[DONE]`: cut), or sent an
    event that is not JSON (`malformed`). The upstream had the round: the turn is charged
    as one stopped (issue 42)."""

    def __init__(self, message: str, malformed: bool = False):
        super().__init__(message)
        self.malformed = malformed

    def before_start(self) -> ApiError:
        """The error a client gets when nothing was sent to it yet."""
        if self.malformed:
            return upstream_bad_stream(str(self))
        error = upstream_unavailable("Llama Stack", "Connection error.")
        error.upstream_received = True
        return error


class ChatRound:
    __slots__ = ("_emitter", "_seen", "finish_reason", "usage")

    def __init__(self, emitter: Emitter, seen_call_ids: set[str]):
        self._emitter = emitter
        self._seen = seen_call_ids        # call ids used so far in this response
        self.finish_reason: str | None = None
        self.usage: ResponseUsage | None = None

    def feed(self, chunk: Chunk) -> None:
        if chunk.__class__ is list:  # text pieces' JSON strings (chat_stream.py)
            self._emitter.text_literals(chunk)
            return
        assert isinstance(chunk, dict)
        error = chunk.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else error
            raise UpstreamChatError(str(message or "the upstream reported an error"))
        if chunk.get("usage"):
            self.usage = usage_of(chunk["usage"])
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n is 1: other choices are not asked for
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning and isinstance(reasoning, str):
                self._emitter.reasoning(reasoning)
            content = delta.get("content")
            if content:
                self._emitter.text(content)
            if delta.get("refusal"):
                self._emitter.refusal(delta["refusal"])
            for call in delta.get("tool_calls") or ():
                self._tool_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def _tool_call(self, call: dict[str, Any]) -> None:
        index = call.get("index", 0)
        function = call.get("function") or {}
        if not self._emitter.has_call(index):
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id or call_id in self._seen:
                # A call the model gave no id, or one already used: the client needs a
                # unique id to answer it.
                call_id = new_item_id("call")
            self._seen.add(call_id)
            self._emitter.call_started(index, call_id, function.get("name") or "")
        arguments = function.get("arguments")
        if arguments:
            self._emitter.call_arguments(index, arguments)
