"""LCORE's rlsapi v1 `/v1/infer` (the RHEL command-line assistant): its request model,
the one input it sends, and its response body (sans-I/O).

The models are LCORE's field for field (`extra="forbid"`, the same patterns, `system_id`
under the alias `id`), so a bad request gets FastAPI's 422 list as LCORE gives it
(`schema/fail_fast.py`). `skip_rag` is accepted and changes nothing (LCORE reserves it).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from gateway.legacy.items import referenced_documents, summaries
from gateway.legacy.stream import answer_text
from gateway.schema.fail_fast import validate
from gateway.schema.json_types import JsonObject

# LCORE's `constants.UNABLE_TO_PROCESS_RESPONSE`: the answer when the model said nothing.
UNABLE_TO_PROCESS = "Unable to process this request"

# LCORE's character sets for what flows into its telemetry.
_SAFE_TEXT = r"^[a-zA-Z0-9._ \-]*$"
_MACHINE_ID = r"^[a-zA-Z0-9._\-]*$"
_NEVRA = r"^[a-zA-Z0-9._:+~\-]*$"


class _Lcore(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InferAttachment(_Lcore):
    contents: str = ""
    mimetype: str = ""


class InferTerminal(_Lcore):
    output: str = ""


class InferSystemInfo(_Lcore):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    os: str = Field("", pattern=_SAFE_TEXT)
    version: str = Field("", pattern=_SAFE_TEXT)
    arch: str = Field("", pattern=_SAFE_TEXT)
    system_id: str = Field("", alias="id", pattern=_MACHINE_ID)


class InferCla(_Lcore):
    nevra: str = Field("", pattern=_NEVRA)
    version: str = Field("", pattern=_MACHINE_ID)


class InferContext(_Lcore):
    stdin: str = ""
    attachments: InferAttachment = Field(default_factory=InferAttachment)
    terminal: InferTerminal = Field(default_factory=InferTerminal)
    systeminfo: InferSystemInfo = Field(default_factory=InferSystemInfo)
    cla: InferCla = Field(default_factory=InferCla)


class InferRequest(_Lcore):
    question: str = Field(..., min_length=1)
    context: InferContext = Field(default_factory=InferContext)
    skip_rag: bool = False
    include_metadata: bool = False

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        stripped = value.strip()
        if not stripped:
            raise ValueError("Question cannot be empty or whitespace-only")
        return stripped


_ADAPTER = TypeAdapter(InferRequest)


def parse_infer_request(raw: Any) -> InferRequest:
    """LCORE's model, or its 422."""
    return validate(_ADAPTER, raw)


def input_source(request: InferRequest) -> str:
    """What the model is asked (LCORE's `get_input_source`): the question, stdin, the
    attachment's contents and the terminal output, the non-empty ones in that order,
    separated by blank lines."""
    context = request.context
    parts = (request.question, context.stdin, context.attachments.contents, context.terminal.output)
    return "\n\n".join(part for part in parts if part)


def infer_response(request_id: str, response: JsonObject | None, verbose: bool,
                   text: str | None = None) -> JsonObject:
    """LCORE's `{"data": {...}}` with null fields left out: `text` and `request_id`,
    and with `verbose` what the turn did (tools, RAG, tokens). `text` overrides the
    response's answer (a shield's message); an empty answer is LCORE's fallback."""
    answer = text if text is not None else (answer_text(response) if response is not None else "")
    data: dict[str, Any] = {"text": answer or UNABLE_TO_PROCESS, "request_id": request_id}
    if verbose and response is not None:
        items = [item for item in response.get("output") or [] if isinstance(item, dict)]
        calls, results, chunks = summaries(items)
        usage = response.get("usage") or {}
        data.update(tool_calls=calls, tool_results=results, rag_chunks=chunks,
                    referenced_documents=referenced_documents(items),
                    input_tokens=int(usage.get("input_tokens") or 0),
                    output_tokens=int(usage.get("output_tokens") or 0))
    return {"data": data}
