"""file_search in the local engine: the parts without I/O (sans-I/O, as
docs/architecture.md's "The local engine" lists it).

The model sees one function, `file_search(query)`, as Llama Stack offers it. A call
searches each of the tool's vector stores (`vector_search.py` sends the requests this
module builds), then:

- `ranking_options.score_threshold` applies to each store's own (raw) score, before
  the multiplier: scores are not bounded by 1 (faiss answers 1.13), and each store's
  scale is its own, so a threshold only means something on that scale;
- the hits of all stores are merged by score × the store's `score_multiplier`
  (`byok_rag`), highest first (ties keep store order), and cut to `max_num_results`;
  a result's `score` is that weighted score, the one the order follows;
- the model reads them as `model_text` formats them, each chunk with the marker it
  cites it by, `<|file-id|>` (Llama Stack's format); `citations.py` turns the markers
  of the answer into `file_citation` annotations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import orjson

from gateway.engine.items import CallItem, ItemKind, Lifecycle

if TYPE_CHECKING:
    from gateway.engine.emitter import Emitter
    from gateway.engine.plan import Plan

NAME = "file_search"
ITEM = ItemKind("file_search_call", "fs", Lifecycle.SEARCH)  # how its calls are shown
SEARCH_PATH = "/v1/vector_stores/{}/search"
DEFAULT_MAX_RESULTS = 10
RESULTS_INCLUDE = "file_search_call.results"
# The function the model calls (Llama Stack 0.7.3's, word for word).
FUNCTION = {"type": "function", "function": {
    "name": NAME, "description": "Search files for relevant information",
    "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "The search query"}},
                   "required": ["query"]}}}
CITE_INSTRUCTION = ("Cite sources immediately at the end of sentences before punctuation, using `<|file-id|>` "
                    "format like 'This is a fact <|file-Cn3MSNn72ENTiiq11Qda4A|>.'. Do not add extra punctuation. "
                    "Use only the file IDs provided, do not invent new ones.")


@dataclass(slots=True, frozen=True)
class Hit:
    """One chunk a store returned."""

    file_id: str
    filename: str
    text: str
    raw_score: float
    score: float                      # raw_score × the store's multiplier
    attributes: dict[str, Any] = field(default_factory=dict)


def query_of(arguments: str) -> str:
    """The query of a call's arguments (`{"query": …}`; a `queries` list is joined).
    Raises ValueError for anything else."""
    try:
        parsed = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"the arguments are not JSON: {exc}") from None
    query = parsed.get("query") if isinstance(parsed, dict) else None
    if query is None and isinstance(parsed, dict) and isinstance(parsed.get("queries"), list):
        query = " ".join(str(part) for part in parsed["queries"])
    if not isinstance(query, str) or not query.strip():
        raise ValueError("file_search needs a non-empty string `query`")
    return query


def search_body(query: str, tool: Mapping[str, Any]) -> dict[str, Any]:
    """The body of `POST /v1/vector_stores/{id}/search` for one store: `filters`,
    `max_num_results` and `ranking_options` as the tool has them."""
    body: dict[str, Any] = {"query": query, "max_num_results": tool.get("max_num_results") or DEFAULT_MAX_RESULTS,
                            "rewrite_query": False}
    for key in ("filters", "ranking_options"):
        if tool.get(key) is not None:
            body[key] = tool[key]
    return body


def hits_of(page: Any, multiplier: float) -> list[Hit]:
    """A search results page (`vector_store.search_results.page`) as hits. Raises
    ValueError when it is not one."""
    data = page.get("data") if isinstance(page, dict) else None
    if not isinstance(data, list):
        raise ValueError("the answer is not a vector store search results page")
    hits = []
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("score"), (int, float)):
            raise ValueError("a search result has no numeric score")
        attributes = entry.get("attributes")
        if not isinstance(attributes, dict):
            attributes = {}
        file_id = str(entry.get("file_id") or attributes.get("document_id") or "")
        filename = str(entry.get("filename") or attributes.get("filename") or file_id or "unknown")
        text = "".join(str(part.get("text") or "") for part in entry.get("content") or ()
                       if isinstance(part, dict) and part.get("type", "text") == "text")
        raw = float(entry["score"])
        hits.append(Hit(file_id, filename, text, raw, raw * multiplier, attributes))
    return hits


def merge(per_store: Iterable[list[Hit]], threshold: float | None, limit: int) -> list[Hit]:
    """Every store's hits at or above `threshold` (their raw score), by weighted score,
    highest first, at most `limit`."""
    hits = [hit for hits in per_store for hit in hits if threshold is None or hit.raw_score >= threshold]
    hits.sort(key=lambda hit: hit.score, reverse=True)  # stable: ties keep store order
    return hits[:limit]


def threshold_of(tool: Mapping[str, Any]) -> float | None:
    options = tool.get("ranking_options")
    value = options.get("score_threshold") if isinstance(options, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def results(hits: list[Hit]) -> list[dict[str, Any]]:
    """The `file_search_call` item's `results`."""
    return [{"file_id": hit.file_id, "filename": hit.filename, "score": hit.score, "text": hit.text,
             "attributes": _scalar_attributes(hit.attributes)} for hit in hits]


def _scalar_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    # The openai type allows strings, numbers and booleans only.
    return {str(key): value for key, value in attributes.items() if isinstance(value, (str, int, float, bool))}


def citation_files(hits: Iterable[Hit]) -> dict[str, str]:
    """file id → filename, for the annotations of the answer."""
    return {hit.file_id: hit.filename for hit in hits if hit.file_id}


def model_text(query: str, hits: list[Hit], failures: Iterable[str] = ()) -> str:
    """What the model reads for a search: each chunk numbered, with the marker that
    cites it first (a model that cuts a long result short still has it), then the
    instruction to cite. Stores that could not be searched are named."""
    lines = [f"file_search found {len(hits)} chunks for {orjson.dumps(query).decode()}."]
    lines += [f"Not searched: {failure}" for failure in failures]
    for number, hit in enumerate(hits, 1):
        lines.append(f"[{number}] <|{hit.file_id}|> {hit.filename} (score {hit.score:.4g})\n{hit.text.strip()}")
    if hits:
        lines.append(f"Use these results only to answer the query. {CITE_INSTRUCTION}")
    return "\n".join(lines)


def history_text(item: Mapping[str, Any]) -> str:
    """An earlier turn's `file_search_call` as the model reads it again."""
    queries = [str(query) for query in item.get("queries") or ()]
    found = item.get("results")
    if not isinstance(found, list):
        return (f"file_search ran for {orjson.dumps(queries).decode()}; its results were not kept (the request "
                f"did not include {RESULTS_INCLUDE}). Search again if they are needed.")
    hits = [Hit(str(entry.get("file_id") or ""), str(entry.get("filename") or ""), str(entry.get("text") or ""),
                float(entry.get("score") or 0), float(entry.get("score") or 0), {})
            for entry in found if isinstance(entry, dict)]
    return model_text(" ".join(queries), hits)


def earlier_citations(items: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The files earlier turns' searches found (the model may cite them again)."""
    files: dict[str, str] = {}
    for item in items:
        if item.get("type") == ITEM.type and isinstance(item.get("results"), list):
            files.update({str(entry["file_id"]): str(entry.get("filename") or entry["file_id"])
                          for entry in item["results"] if isinstance(entry, dict) and entry.get("file_id")})
    return files


def offer(tools: list[dict[str, Any]], include: Any, plan: "Plan", emitter: "Emitter",
          earlier: Iterable[Mapping[str, Any]]) -> None:
    """The request's file_search tool (its first, as Llama Stack) offered to the model
    as the function `file_search`, its calls shown as `file_search_call` items; and the
    files earlier turns found, which the answer may cite."""
    files = earlier_citations(earlier)
    if files:
        emitter.cite(files)
    tool = next((tool for tool in tools if tool.get("type") == "file_search"), None)
    if tool is None:
        return
    plan.tools[NAME] = {**tool, "name": NAME,
                        "include_results": isinstance(include, list) and RESULTS_INCLUDE in include}
    plan.chat.setdefault("tools", []).append(FUNCTION)
    emitter.call_items[NAME] = CallItem(ITEM, {"queries": [], "results": None})
