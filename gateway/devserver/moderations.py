"""POST /v1/moderations: OpenAI's moderation API with scripted verdicts (the local
engine's guardrails check text here when no other moderation endpoint is configured).

Body `{"input": "<text>" | ["<text>", ...], "model": "<id>"}`; one result per text,
OpenAI's shape (`flagged`, `categories`, `category_scores`). Models:

* `scripted-guard` (also when `model` is omitted): flags a text containing `flag-me`
  (category `violence`);
* `scripted-output-guard`: flags a text containing `flag-me` after `Scripted reply`, so
  only the scripted model's answers (which repeat the user's text) are flagged, never
  the user's input itself;
* any other model: 404 (`The model `x` does not exist.`), a 4xx a guardrail names
  wrongly;
* any model, a text containing `break-moderation` after `Scripted reply` (an answer,
  not the input): 500, a moderation service failing in the middle of an answer.
"""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

from .chat import bad_request, json_body, model_missing
from .shapes import json_response

TRIGGER = "flag-me"
CATEGORIES = ("harassment", "hate", "self-harm", "sexual", "violence")


def _in_an_answer(word: str, text: str) -> bool:
    at = text.find("Scripted reply")
    return at >= 0 and word in text[at:]


def _flagged(model: str, text: str) -> bool:
    return _in_an_answer(TRIGGER, text) if model == "scripted-output-guard" else TRIGGER in text


def _result(model: str, text: str) -> dict[str, Any]:
    flagged = _flagged(model, text)
    return {"flagged": flagged,
            "categories": {category: flagged and category == "violence" for category in CATEGORIES},
            "category_scores": {category: 0.99 if flagged and category == "violence" else 0.01
                                for category in CATEGORIES}}


async def moderations(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    model = body.get("model") or "scripted-guard"
    if model not in ("scripted-guard", "scripted-output-guard"):
        return model_missing(model)
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        return bad_request("input must be a string or a list of strings", "input")
    if any(_in_an_answer("break-moderation", text) for text in texts):
        return json_response({"error": {"message": "scripted moderation failure", "type": "server_error",
                                        "param": None, "code": None}}, 500)
    return json_response({"id": f"modr-{uuid.uuid4().hex}", "model": model,
                          "results": [_result(model, text) for text in texts]})
