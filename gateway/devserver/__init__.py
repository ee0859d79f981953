"""The scripted upstream: a deterministic HTTP server for the demo, the tests and the benchmark.

It plays two roles at once:

1. **The inference backend behind a real Llama Stack** (`remote::vllm`, base_url
   http://HOST:PORT/v1): GET /v1/models, GET /health and /v1/health,
   POST /v1/chat/completions (stream or not), POST /v1/embeddings (384-dim hashed
   bag-of-words, L2-normalised), POST /v1/moderations (scripted verdicts: models
   `scripted-guard` and `scripted-output-guard`, see `moderations.py`).
2. **A stand-in for Llama Stack 0.7.3 itself**, quirks included: POST/GET /v1/responses,
   GET/DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items,
   POST /v1/responses/{id}/cancel, the Conversations API, GET /v1/version,
   GET /v1/inspect/routes. Models: `scripted/scripted-chat` and `scripted-chat` (and a second
   LLM, `scripted-mini`, listed after the embedding model; `--provider-ids` lists them as
   Llama Stack names them, `scripted/scripted-chat` with `provider_id: scripted` and
   `provider_resource_id: scripted-chat` in `custom_metadata`);
   `scripted/ghost-model` behaves like a model the backend does not know (500, or
   `response.failed` in a stream); anything else is Llama Stack's "Model not found" (404,
   or the untyped `{"error": ...}` event in a stream).

Replies come from one scripted model (`model.py`) for both roles:
``Scripted reply (turn N, M messages): <last user text>`` where N counts user messages
and M non-system messages; a tool call when tools are given and the last user message
has a trigger word (tool, call, use, search, weather, add); ``Tool said: <output>`` after
a tool result; ``Recap: <every earlier user text>`` when the last user text has
``scripted-recap`` (what reached the model: a compaction summary). MCP servers are
simulated (tools `add` and `echo`); file_search returns made-up deterministic chunks.

Triggers (words in the last user text of the current turn; in a turn whose text has
none, in its instructions (Responses) or its first message when that is the system's
(chat), so a test can make only the calls with a given system prompt fail, e.g. the
gateway's topic-summary calls):

* ``fail-upstream``: chat -> 500 OpenAI error body; responses -> 500
  ``{"detail":"scripted upstream failure"}``, or created, in_progress, response.failed.
* ``context-overflow``: chat -> 400 (code ``context_length_exceeded``); responses -> 400
  ``{"detail":"Input exceeds the model's maximum context length (context_length_exceeded)"}``,
  or the same message in response.failed.
* ``hang-upstream``: the request is accepted and nothing is ever sent (no status line)
  until the client goes away.
* ``stall-stream``: a stream sends its first events (responses: created + in_progress;
  chat: the role chunk) and then nothing, until the client goes away.
* ``break-stream``: a stream sends a few deltas, then the body ends without a terminal
  event (no response.completed / finish chunk / [DONE]).
* ``garbage-frame`` / ``not-json-frame`` / ``not-json-first`` / ``cut-frame`` /
  ``unterminated-frame`` (streams; malformed SSE): lines that are no SSE field after the
  opening frames; a ``data:`` line that is not JSON after the first text delta, or as the
  stream's first frame; the body cut in the middle of the event after a few deltas; the
  last frame (responses: the terminal event; chat: ``[DONE]``) without its blank line.
* ``upstream-503`` / ``rate-limited`` / ``rate-limited-after`` (chat and responses, JSON
  or stream): answered 503, 429, or 429 with ``Retry-After: 1``, before anything else.
  ``reset-stream``: as ``break-stream``, but the connection is dropped instead of the body
  ending.
* ``big-reply``: the reply grows by 2 MiB of filler words, streamed as one text delta.
* ``error-event``: responses -> the untyped ``{"error": {...}}`` event after in_progress;
  chat -> a ``data: {"error": {...}}`` chunk after the role chunk, then [DONE].
* ``echo-error``: an error whose message repeats what the request carried (its
  ``Authorization`` and ``X-LlamaStack-Provider-Data`` headers, its tools with URLs and
  credentials), as a careless upstream would: responses -> 400 ``{"detail": ...}``, or
  created, in_progress, response.failed; chat -> 400 OpenAI error body, or an error chunk
  after the role chunk. ``echo-error-first``: the same, streamed as the first event
  (responses: the untyped error event with code 400; chat: the first chunk).
* ``finish-length`` / ``content-filter``: chat ends the completion with that
  ``finish_reason``; responses end ``incomplete`` with ``incomplete_details.reason``
  ``max_output_tokens`` / ``content_filter`` (``response.incomplete`` in a stream),
  after the text. ``parallel-calls`` (with a tool trigger) calls every tool in one turn
  (responses: every function tool). Chat only: ``think-aloud`` streams ``reasoning_content``
  ("Thinking about: <text>") before the text; ``loop-tools`` (with a tool trigger) calls a tool again after every tool
  result, forever. ``--chat-deltas N`` streams every completion's text in N pieces.
* an MCP tool whose ``server_url`` contains ``unreachable``: 502 like Llama Stack when it
  cannot reach an MCP server (response.failed in a stream).
* an MCP tool whose ``server_url`` contains ``faulty`` also lists ``explode``, ``reject``
  and ``vanish`` (tests/support/mcp_server.py ``--faulty``), which fail as recorded: the
  ``mcp_call`` item's ``error`` is ``"Error (code 1): None"`` (the tool raised) or
  ``"reject refused: <text>"`` (a JSON-RPC error), ``response.mcp_call.failed`` in a
  stream; ``vanish`` (the server gone mid-call) never answers: nothing after
  ``mcp_call.in_progress`` in a stream, no status line for JSON, until the client goes.

Knobs (string values in the request's ``metadata``; chat completions read them too):

* ``scripted_deltas``: exact number of text delta events (the reply is padded with
  filler words, or its words merged, to fit);
* ``scripted_delay_ms``: sleep between consecutive stream events, and before a JSON
  answer. The server-wide default is ``--delay-ms`` / ``create_app(delay_ms=...)``.
* ``scripted_dialect``: ``llama-stack`` (data lines, ``type`` last) or ``openai``
  (``event:`` lines, ``type`` first) framing of /v1/responses streams. The server-wide
  default is ``--dialect`` / ``create_app(dialect=...)``;
* ``scripted_echo_tools``: ``verbatim`` repeats the request's tools in the response
  objects exactly as they came (URLs, headers and credentials included), as an upstream
  that echoes everything would; Llama Stack repeats only type, label and allowed tools.

``--llama-stack-items`` (``create_app(llama_stack_items=True)``) keeps conversation items
as Llama Stack 0.7.3 does: timed in whole seconds (a created conversation's items all
now, each add-items call's now + index) and listed, and read by a conversation's first
turn, sorted by that time; a turn's input messages keep their string content; a later
turn reads the last turn's messages, not the items added since (conversations.py).

Test endpoints: GET /_scripted/requests (what was received, newest last), DELETE
/_scripted/requests (clear), GET /_scripted/mcp (MCP tool definitions received, with
their headers/authorization), GET /_scripted/open (``{"open_requests", "open_streams"}``:
requests in flight now, and how many of them are SSE streams), POST
/_scripted/conversation_ids (``{"ids": [...]}``: the next conversations created get these
ids, in order, whatever their form).

Run it with ``python -m gateway.devserver --host 127.0.0.1 --port 18000``.
"""

from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
