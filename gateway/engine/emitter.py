"""The one emitter of a response's stream (sans-I/O): it owns the response object,
`sequence_number` (contiguous from 0), output indexes and item ids across every round
of the loop, and pairs every `*.added` with its `*.done`.

The loop tells it what the model produced (`text`, `refusal`, `reasoning`, a tool
call's start and argument pieces, a finished item) and takes the events with `take()`.
Items are opened lazily and closed in the order they were opened when the round ends
(`close_items`). `response.created` and `response.in_progress` come once (`start`),
exactly one terminal event at the end (`finish` or `fail`).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from gateway.engine.citations import CitationFilter, Citations
from gateway.engine.items import CallItem, Lifecycle
from gateway.schema.ids import new_item_id
from gateway.schema.json_types import ResponseUsage
from gateway.streaming.events import Event, Framed

TERMINAL_TYPES = {"completed": "response.completed", "incomplete": "response.incomplete",
                  "failed": "response.failed", "requires_action": "response.requires_action"}


def _copy(item: dict[str, Any]) -> dict[str, Any]:
    """The item as it is now: events are serialised later, after the item changed."""
    return {key: list(value) if isinstance(value, list) else value for key, value in item.items()}


class _Open:
    """An item being streamed: where it is and what it has so far."""

    __slots__ = ("item", "index", "text", "head", "call", "lifecycle")

    def __init__(self, item: dict[str, Any], index: int):
        self.item = item
        self.index = index
        self.text: list[Any] = []   # pieces: JSON strings (output text), else str
        self.head: bytes | None = None  # a text delta event's bytes up to the delta
        self.call: dict[str, Any] | None = None  # a server-side call's view for the loop
        self.lifecycle: Lifecycle | None = None  # a server-side call's (items.py)


class Emitter:
    __slots__ = ("response", "_events", "_next", "_message", "_reasoning", "_calls", "_opened", "round_text",
                 "call_items", "_running", "citations", "sources", "_cited")

    def __init__(self, response: dict[str, Any]):
        self.response = response
        self._events: list[Event] = []
        self._next = 0
        self._message: _Open | None = None      # the open assistant message (text or refusal part)
        self._reasoning: _Open | None = None
        self._calls: dict[int, _Open] = {}      # the round's tool calls by their Chat Completions index
        self._opened: list[_Open] = []          # open items, in the order they were opened
        self.round_text: list[str] = []         # the answer's text closed this round (for the next messages)
        # Tool names (as the model sees them) whose calls are items of their own while
        # they run (an `mcp_call`): name → the item's kind and fixed fields.
        self.call_items: dict[str, CallItem] = {}
        self._running: dict[str, _Open] = {}    # such calls between their arguments and their result
        # Set once a search found files the answer may cite: the answer's citation
        # markers become annotations (citations.py).
        self.citations: CitationFilter | None = None
        # The open answer's file citations: their events follow its text, at its end
        # (after the text they annotate, as web sources' do).
        self._cited: list[dict[str, Any]] = []
        self.sources: Citations | None = None  # sources web_search numbered: annotations on the answer

    @property
    def started(self) -> bool:
        return self._next > 0

    @property
    def output(self) -> list[dict[str, Any]]:
        output: list[dict[str, Any]] = self.response["output"]
        return output

    def take(self) -> list[Event]:
        """The events emitted since the last call."""
        events, self._events = self._events, []
        return events

    def _emit(self, data: dict[str, Any]) -> None:
        data["sequence_number"] = self._next
        self._next += 1
        self._events.append(Event(data["type"], None, data))

    def _snapshot(self) -> dict[str, Any]:
        return {**self.response, "output": list(self.response["output"])}

    def start(self) -> None:
        self._emit({"type": "response.created", "response": self._snapshot()})
        self._emit({"type": "response.in_progress", "response": self._snapshot()})

    # Items.

    def _open(self, item: dict[str, Any]) -> _Open:
        opened = _Open(item, len(self.output))
        self.output.append(item)
        self._opened.append(opened)
        self._emit({"type": "response.output_item.added", "output_index": opened.index, "item": _copy(item)})
        return opened

    def text(self, delta: str) -> None:
        """A piece of the answer."""
        if delta:
            self.text_literals([orjson.dumps(delta)])

    def text_literals(self, literals: list[bytes]) -> None:
        """Pieces of the answer as JSON strings, as the upstream sent them: copied into
        their events as they are. The hot path (an event per upstream chunk): bytes,
        never a dict, each event a whole frame; the text is decoded once, when the
        item closes."""
        literals = [literal for literal in literals if literal != b'""']
        if not literals:
            return
        if self.citations is not None:  # decoded: markers are cut out, annotations added
            for piece in self.citations.feed("".join([orjson.loads(literal) for literal in literals])):
                if isinstance(piece, str):
                    self._deltas([orjson.dumps(piece)])
                else:
                    self._annotate(piece)
            return
        self._deltas(literals)

    def _deltas(self, literals: list[bytes]) -> None:
        message = self._message_for("output_text")
        message.text += literals
        head = message.head
        if head is None:
            head = message.head = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",' \
                                  b'"item_id":"%s","output_index":%d,"content_index":0,"logprobs":[],"delta":' % (
                                      message.item["id"].encode(), message.index)
        number = self._next
        self._next = number + len(literals)
        self._events += [Framed("response.output_text.delta", b"%s%s,\"sequence_number\":%d}\n\n" % (head, literal, n), n)
                         for n, literal in enumerate(literals, number)]

    def cite(self, files: dict[str, str]) -> None:
        """Files the answer may cite from now on (file id → filename)."""
        if self.citations is None:
            self.citations = CitationFilter(dict(files))
        else:
            self.citations.files.update(files)

    def _annotate(self, annotation: dict[str, Any]) -> None:
        self._message_for("output_text")  # the answer it belongs to, opened if need be
        self._cited.append(annotation)

    def refusal(self, delta: str) -> None:
        message = self._message_for("refusal")
        message.text.append(delta)
        self._emit({"type": "response.refusal.delta", "item_id": message.item["id"], "output_index": message.index,
                    "content_index": 0, "delta": delta})

    def _message_for(self, kind: str) -> _Open:
        """The open assistant message whose part is of `kind` (opened, or a new one)."""
        message = self._message
        if message is not None and message.item["content"][0]["type"] == kind:
            return message
        if self._reasoning is not None:  # the model finished thinking: the answer is its own item
            self._close(self._reasoning)
        if message is not None:
            self._close(message)
        message = self._message = self._open({"id": new_item_id("msg"), "type": "message", "role": "assistant",
                                              "status": "in_progress", "content": []})
        part = ({"type": "output_text", "text": "", "annotations": [], "logprobs": []} if kind == "output_text"
                else {"type": "refusal", "refusal": ""})
        message.item["content"].append(part)
        self._emit({"type": "response.content_part.added", "item_id": message.item["id"],
                    "output_index": message.index, "content_index": 0, "part": dict(part)})
        return message

    def reasoning(self, delta: str) -> None:
        reasoning = self._reasoning
        if reasoning is None:
            reasoning = self._reasoning = self._open({"id": new_item_id("rs"), "type": "reasoning", "summary": [],
                                                      "content": [], "status": "in_progress"})
            self._emit({"type": "response.content_part.added", "item_id": reasoning.item["id"],
                        "output_index": reasoning.index, "content_index": 0,
                        "part": {"type": "reasoning_text", "text": ""}})
        reasoning.text.append(delta)
        self._emit({"type": "response.reasoning_text.delta", "item_id": reasoning.item["id"],
                    "output_index": reasoning.index, "content_index": 0, "delta": delta})

    def call_started(self, index: int, call_id: str, name: str) -> None:
        """A tool call of this round begins (Chat Completions' `tool_calls[].index`)."""
        shown = self.call_items.get(name)
        if shown is None:
            self._calls[index] = self._open({"id": new_item_id("fc"), "type": "function_call", "call_id": call_id,
                                             "name": name, "arguments": "", "status": "in_progress"})
            return
        kind = shown.kind
        head = {"id": new_item_id(kind.id_prefix), "type": kind.type, **shown.fields}
        if kind.lifecycle is Lifecycle.APPROVAL:  # shown when its arguments are complete
            opened = self._calls[index] = self._open({**head, "arguments": ""})
            opened.call = {"call_id": call_id, "name": name, "arguments": "", "approval": True}
        else:
            # A search shows its query at the end, in its own fields.
            arguments = {} if kind.lifecycle is Lifecycle.SEARCH else {"arguments": ""}
            opened = self._calls[index] = self._open({**head, **arguments, "status": "in_progress"})
            opened.call = {"call_id": call_id, "name": name, "arguments": ""}
        opened.lifecycle = kind.lifecycle

    def call_arguments(self, index: int, delta: str) -> None:
        call = self._calls[index]
        call.text.append(delta)
        if call.lifecycle is Lifecycle.APPROVAL or call.lifecycle is Lifecycle.SEARCH:
            return  # the openai types have no argument events for these
        kind = "function_call" if call.call is None else call.item["type"]
        self._emit({"type": f"response.{kind}_arguments.delta", "item_id": call.item["id"],
                    "output_index": call.index, "delta": delta})

    def call_done(self, call_id: str, fields: dict[str, Any], failed: bool) -> bool:
        """A server-side call's result (`output` or `error`) into its item, which is then
        done; False when the call has no item of its own (a function call)."""
        opened = self._running.pop(call_id, None)
        if opened is None:
            return False
        item = opened.item
        search = opened.lifecycle is Lifecycle.SEARCH
        item.update({key: value for key, value in fields.items() if not search or key in item})
        item["status"] = "failed" if failed else "completed"
        base = {"item_id": item["id"], "output_index": opened.index}
        self._emit({"type": f"response.{item['type']}.{'completed' if search else item['status']}", **base})
        self._emit({"type": "response.output_item.done", "output_index": opened.index, "item": _copy(item)})
        return True

    def call_running(self, item: dict[str, Any], call_id: str) -> None:
        """A server-side call that runs without the model (an approved MCP call): its
        item, in progress until `call_done`."""
        opened = self._open(item)
        self._opened.remove(opened)
        opened.lifecycle = Lifecycle.ARGUMENTS
        base = {"item_id": item["id"], "output_index": opened.index}
        # Its arguments in one piece (known already), as a model's call shows them.
        self._emit({"type": f"response.{item['type']}_arguments.delta", **base, "delta": item["arguments"]})
        self._emit({"type": f"response.{item['type']}_arguments.done", **base, "arguments": item["arguments"]})
        self._emit({"type": f"response.{item['type']}.in_progress", **base})
        self._running[call_id] = opened

    def list_started(self, item: dict[str, Any]) -> _Open:
        """A tool listing (`mcp_list_tools`) begins."""
        opened = self._open(item)
        self._opened.remove(opened)  # not closed with the round: list_done closes it
        self._emit({"type": f"response.{item['type']}.in_progress", "item_id": item["id"],
                    "output_index": opened.index})
        return opened

    def list_done(self, opened: _Open, fields: dict[str, Any], failed: bool) -> None:
        item = opened.item
        item.update(fields)
        self._emit({"type": f"response.{item['type']}.{'failed' if failed else 'completed'}", "item_id": item["id"],
                    "output_index": opened.index})
        self._emit({"type": "response.output_item.done", "output_index": opened.index, "item": _copy(item)})

    def has_call(self, index: int) -> bool:
        return index in self._calls

    def add_item(self, item: dict[str, Any]) -> dict[str, Any]:
        """A finished item (a tool's result, a server-side call): added and done at once."""
        opened = self._open(item)
        self._close(opened)
        return item

    def close_items(self) -> list[dict[str, Any]]:
        """End the round: close every open item in the order it was opened. Returns the
        round's calls, in call order (`call_id`, `name`, `arguments`). A server-side
        call's item stays open (`response.<type>.in_progress`) until `call_done`."""
        calls = [self._calls[index] for index in sorted(self._calls)]
        for opened in list(self._opened):
            self._close(opened)
        self._calls = {}
        return [opened.item if opened.call is None else opened.call for opened in calls]

    def _close(self, opened: _Open) -> None:
        item = opened.item
        self._opened.remove(opened)
        base = {"item_id": item["id"], "output_index": opened.index}
        if item["type"] == "message" and item["content"][0]["type"] == "output_text":
            if self.citations is not None:
                for piece in self.citations.flush():  # text held back in case a marker began
                    self._deltas([orjson.dumps(piece)])
                self.citations.reset()  # the next text part counts from 0
            cited, self._cited = self._cited, []
            # The pieces are JSON strings: their insides joined are one JSON string.
            text = orjson.loads(b'"%s"' % b"".join([piece[1:-1] for piece in opened.text]))
            self.round_text.append(text)
        else:
            text = "".join(opened.text)
        if item["type"] == "message":
            part = item["content"][0]
            if part["type"] == "output_text":
                part["text"] = text
                if cited:
                    self._add_annotations(part, base, cited)
                if self.sources is not None:
                    self._add_annotations(part, base, self.sources.annotations(text))
                self._emit({"type": "response.output_text.done", **base, "content_index": 0, "text": text,
                            "logprobs": []})
            else:
                part["refusal"] = text
                self._emit({"type": "response.refusal.done", **base, "content_index": 0, "refusal": text})
            self._emit({"type": "response.content_part.done", **base, "content_index": 0, "part": dict(part)})
            self._message = None
        elif item["type"] == "reasoning" and opened is self._reasoning:
            part = {"type": "reasoning_text", "text": text}
            item["content"] = [part]
            self._emit({"type": "response.reasoning_text.done", **base, "content_index": 0, "text": text})
            self._emit({"type": "response.content_part.done", **base, "content_index": 0, "part": dict(part)})
            self._reasoning = None
        elif item["type"] == "function_call" and item.get("status") == "in_progress":
            item["arguments"] = text
            self._emit({"type": "response.function_call_arguments.done", **base, "name": item["name"],
                        "arguments": text})
        elif opened.lifecycle is Lifecycle.APPROVAL:
            assert opened.call is not None   # a server-side call's item has its view
            item["arguments"] = opened.call["arguments"] = text
        elif opened.lifecycle is Lifecycle.SEARCH and item.get("status") == "in_progress":
            assert opened.call is not None
            opened.call["arguments"] = text
            self._emit({"type": f"response.{item['type']}.in_progress", **base})
            self._emit({"type": f"response.{item['type']}.searching", **base})
            self._running[opened.call["call_id"]] = opened
            return
        elif opened.call is not None and item.get("status") == "in_progress":
            item["arguments"] = opened.call["arguments"] = text
            self._emit({"type": f"response.{item['type']}_arguments.done", **base, "arguments": text})
            self._emit({"type": f"response.{item['type']}.in_progress", **base})
            self._running[opened.call["call_id"]] = opened
            return
        if "status" in item and item["status"] == "in_progress":
            item["status"] = "completed"
        self._emit({"type": "response.output_item.done", "output_index": opened.index, "item": _copy(item)})

    def _add_annotations(self, part: dict[str, Any], base: dict[str, Any], found: list[dict[str, Any]]) -> None:
        """Annotations of the answer's text (its file citations, the markers of web
        sources), each with its event: after the last delta, before `output_text.done`."""
        # A new list: `content_part.added` may still hold the old one, unserialised.
        part["annotations"] = [*part["annotations"], *found]
        for index, annotation in enumerate(found, len(part["annotations"]) - len(found)):
            self._emit({"type": "response.output_text.annotation.added", **base, "content_index": 0,
                        "annotation_index": index, "annotation": annotation})

    # The end.

    def finish(self, status: str, usage: ResponseUsage | None, incomplete_reason: str | None = None) -> Event:
        """The terminal event (returned, not queued: it waits for settlement)."""
        for opened in list(self._opened):
            self._close(opened)
        response = self.response
        response["status"] = status
        response["usage"] = usage
        if status == "completed":
            response["completed_at"] = int(time.time())
        if status == "incomplete" and incomplete_reason:
            response["incomplete_details"] = {"reason": incomplete_reason}
        return self._terminal(status)

    def fail(self, message: str, usage: ResponseUsage | None = None, code: str = "server_error") -> Event:
        for opened in list(self._opened):
            self._close(opened)
        for call_id in list(self._running):  # calls cut short: done, failed
            self.call_done(call_id, {"error": {"type": "http_error", "code": 0, "message": message}}, True)
        self.response.update(status="failed", usage=usage, error={"code": code, "message": message})
        return self._terminal("failed")

    def stop(self, reason: str) -> None:
        """The stream was stopped before its end: the response as far as it got,
        `incomplete` with `reason`; its open items closed `incomplete`, calls still
        running failed. No terminal event (nobody reads this stream any more)."""
        for opened in list(self._opened):
            self._close(opened)
            if opened.item.get("status") == "completed":
                opened.item["status"] = "incomplete"
        for call_id in list(self._running):
            self.call_done(call_id, {"error": {"type": "http_error", "code": 0, "message": reason}}, True)
        self._events = []
        self.response.update(status="incomplete", incomplete_details={"reason": reason})

    def _terminal(self, status: str) -> Event:
        kind = TERMINAL_TYPES[status]
        data = {"type": kind, "response": self.response, "sequence_number": self._next}
        self._next += 1
        return Event(kind, None, data)
