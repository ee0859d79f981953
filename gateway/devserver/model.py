"""The scripted "model": chat history + tools in, a deterministic text or tool call out.

Both API families of the devserver (Chat Completions and the Llama Stack stand-in's
Responses) call :func:`decide`, so a reply proves the same thing whichever way the
gateway reached us: ``Scripted reply (turn N, M messages): ...`` counts the user
messages (N) and the non-system messages (M) that reached the model.

Rules, in order (reference §2 "Scripted upstream"):

1. tools present, last message is ``user`` and its text contains a trigger word
   (tool, call, use, search, weather, add) -> a tool call: the tool whose name appears
   in the text, else the first tool, with arguments made up from its JSON schema;
2. last message is ``tool`` -> ``Tool said: <content>`` (content cut to 200 chars);
3. the last user text has ``scripted-answer: X`` -> exactly ``X`` (the rest of that
   line), so a test can script a verdict (a question-validity shield's ``ALLOWED``);
4. the last user text has ``scripted-recap`` -> ``Recap: <every earlier user text, joined
   by " | ">``, so a test sees what reached the model (a compaction summary, and what a
   turn after it knows);
5. otherwise ``Scripted reply (turn N, M messages): <last user text>``.

Token usage is a word count: prompt = words of every message content, completion =
words of the answer (or of the tool-call arguments).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

# Word-start match so "Use", "tools", "searching" trigger but "houses" does not.
# A user message with this calls a tool again after every tool result: a model that
# loops until the gateway's limits stop it (tests/e2e/test_quota_invariant.py).
LOOP_TOOLS = "loop-tools"
# A user message with this gets a reply grown by BIG_REPLY_BYTES of filler words, streamed
# as one delta: far larger than any read buffer (issue 42).
BIG_REPLY = "big-reply"
BIG_REPLY_BYTES = 2 * 1024 * 1024
TRIGGER_RE = re.compile(r"\b(?:tool|call|use|search|weather|add)", re.IGNORECASE)
_WORD_RE = re.compile(r"\S+\s*")
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")
_SENTENCE_END = (".", "!", "?", ":")
# Property names whose natural value is the user's whole request.
_TEXTY_PROPS = frozenset({"query", "q", "text", "input", "prompt", "message", "question",
                          "content", "search", "search_query", "queries"})
_FILLER = ("lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit")
TOOL_SAID_LIMIT = 200  # the recorded scripted upstream cut tool results to 200 chars


@dataclass(slots=True)
class ToolSpec:
    """A tool as the model sees it (Chat Completions `function`)."""

    name: str
    parameters: dict[str, Any] | None = None


@dataclass(slots=True)
class Reply:
    """What the model answered, plus the usage it reports for this one call."""

    text: str | None
    tool_name: str | None = None
    arguments: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # The stream pieces of `text` when a caller asked for an exact delta count.
    pieces: list[str] | None = None


def content_text(content: Any) -> str:
    """Text of a message content: a string, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
            elif isinstance(part, str):
                texts.append(part)
        return " ".join(texts)
    return str(content)


def count_words(text: str) -> int:
    return len(text.split())


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    total = 0
    for msg in messages:
        total += count_words(content_text(msg.get("content")))
    return total


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for msg in reversed(messages):
        if msg.get("role") == "user":
            return content_text(msg.get("content"))
    return ""


def split_words(text: str) -> list[str]:
    """One piece per word with its trailing whitespace (how the stream chunks text)."""
    pieces = _WORD_RE.findall(text)
    if not pieces:
        return [text] if text else []
    lead = len(text) - len(text.lstrip())
    if lead:
        pieces[0] = text[:lead] + pieces[0]
    return pieces


def fit_pieces(text: str, n: int) -> list[str]:
    """Exactly n stream pieces for text: pad with filler words or merge words."""
    pieces = split_words(text)
    if n <= 0:
        return []
    if len(pieces) < n:
        if pieces and not pieces[-1][-1].isspace():
            pieces[-1] += " "
        missing = n - len(pieces)
        for i in range(missing):
            word = _FILLER[i % len(_FILLER)]
            pieces.append(word if i == missing - 1 else word + " ")
        return pieces
    if len(pieces) > n:
        # Spread the words over n groups; the first groups take the remainder.
        size, extra = divmod(len(pieces), n)
        merged, at = [], 0
        for i in range(n):
            take = size + (1 if i < extra else 0)
            merged.append("".join(pieces[at:at + take]))
            at += take
        return merged
    return pieces


def chunk16(text: str) -> list[str]:
    """Tool-call argument deltas: 16-character pieces, as the recorded upstream sent them."""
    return [text[i:i + 16] for i in range(0, len(text), 16)] or [""]


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def _is_system(role: Any) -> bool:
    return role in ("system", "developer")


SCRIPTED_ANSWER = "scripted-answer:"
SCRIPTED_RECAP = "scripted-recap"


def scripted_text(messages: list[dict[str, Any]]) -> str:
    text = last_user_text(messages)
    if SCRIPTED_ANSWER in text:
        return text.rsplit(SCRIPTED_ANSWER, 1)[1].split("\n", 1)[0].strip()
    if SCRIPTED_RECAP in text:
        earlier = [content_text(msg.get("content")) for msg in messages if msg.get("role") == "user"][:-1]
        return "Recap: " + " | ".join(earlier)
    turn = 0
    counted = 0
    for msg in messages:
        role = msg.get("role")
        if role == "user":
            turn += 1
        if not _is_system(role):
            counted += 1
    return f"Scripted reply (turn {turn}, {counted} messages): {text}"


def _pick_tool(text: str, tools: list[ToolSpec]) -> ToolSpec:
    lowered = text.lower()
    for tool in tools:
        if re.search(r"(?<![\w])" + re.escape(tool.name.lower()) + r"(?![\w])", lowered):
            return tool
    return tools[0]


def _proper_noun(text: str) -> str | None:
    """First capitalised word not starting a sentence ("Paris" in "What is ... in Paris?")."""
    words = text.split()
    for i in range(1, len(words)):
        word = words[i].strip(".,;:!?\"'()[]")
        if word[:1].isupper() and not words[i - 1].endswith(_SENTENCE_END):
            return word
    return None


def make_arguments(schema: dict[str, Any] | None, text: str) -> dict[str, Any]:
    """Arguments for a tool call, made up from its JSON schema and the user's text."""
    numbers = [float(n) if "." in n else int(n) for n in _NUMBER_RE.findall(text)]
    state = {"next_number": 2}

    def number() -> int | float:
        if numbers:
            return numbers.pop(0)
        value = state["next_number"]
        state["next_number"] += 1
        return value

    def value_for(name: str, prop: dict[str, Any]) -> Any:
        if not isinstance(prop, dict):
            return text
        if prop.get("enum"):
            return prop["enum"][0]
        kind = prop.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        if kind == "integer":
            return int(number())
        if kind == "number":
            return number()
        if kind == "boolean":
            return True
        if kind == "array":
            return [value_for(name, prop.get("items") or {"type": "string"})]
        if kind == "object":
            return make_arguments(prop, text)
        if name.lower() in _TEXTY_PROPS:
            return text
        return _proper_noun(text) or text

    if not isinstance(schema, dict):
        return {}
    props = schema.get("properties") or {}
    if not isinstance(props, dict):
        return {}
    required = schema.get("required")
    if isinstance(required, list) and required:
        names = [n for n in props if n in required]
    else:
        names = list(props)
    return {name: value_for(name, props[name]) for name in names}


def decide(messages: list[dict[str, Any]], tools: list[ToolSpec] | None = None, *,
           tool_choice: Any = None, deltas: int | None = None) -> Reply:
    """The scripted model: one deterministic answer for a chat history.

    tool_choice: "none" disables tools; "required" or {"name": X} / {"function": {"name": X}}
    forces a call when the last message is from the user. deltas: exact number of text
    pieces wanted (the text is padded or merged to fit).
    """
    prompt = prompt_tokens(messages)
    last = messages[-1] if messages else {}
    role = last.get("role")
    looping = role == "tool" and LOOP_TOOLS in last_user_text(messages)
    if tools and tool_choice != "none" and (role == "user" or looping):
        text = content_text(last.get("content")) if role == "user" else last_user_text(messages)
        forced = _forced_tool(tool_choice, tools)
        if forced is not None or tool_choice == "required" or TRIGGER_RE.search(text):
            tool = forced or _pick_tool(text, tools)
            arguments = json.dumps(make_arguments(tool.parameters, text))
            return Reply(None, tool.name, arguments, prompt, count_words(arguments))
    if role == "tool":
        answer = "Tool said: " + content_text(last.get("content"))[:TOOL_SAID_LIMIT]
    else:
        answer = scripted_text(messages)
        if BIG_REPLY in answer:  # a reply far larger than any read buffer, in one delta (issue 42)
            answer += " " + "filler " * (BIG_REPLY_BYTES // 7)
            return Reply(answer, prompt_tokens=prompt, completion_tokens=count_words(answer), pieces=[answer])
    pieces = None
    if deltas is not None:
        pieces = fit_pieces(answer, deltas)
        answer = "".join(pieces)
    return Reply(answer, prompt_tokens=prompt, completion_tokens=count_words(answer), pieces=pieces)


def _forced_tool(tool_choice: Any, tools: list[ToolSpec]) -> ToolSpec | None:
    if not isinstance(tool_choice, dict):
        return None
    name = tool_choice.get("name")
    if name is None and isinstance(tool_choice.get("function"), dict):
        name = tool_choice["function"].get("name")
    return next((t for t in tools if t.name == name), None)
