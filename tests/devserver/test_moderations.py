"""The stand-in's `POST /v1/moderations`, through its app: scripted verdicts in OpenAI's
shape (`flag-me` anywhere, or only in an answer for the output guard), an unknown model's
404, a bad input's 400, and a failure mid-answer's 500."""

from __future__ import annotations

import pytest

from gateway.devserver import create_app

ANSWER = "Scripted reply: you said flag-me"


@pytest.fixture
async def client(aiohttp_client):
    return await aiohttp_client(create_app())


async def verdicts(client, texts, model: str | None = "scripted-guard") -> list[bool]:
    body = {"input": texts} | ({"model": model} if model else {})
    reply = await client.post("/v1/moderations", json=body)
    assert reply.status == 200
    data = await reply.json()
    assert data["id"].startswith("modr-") and data["model"] == (model or "scripted-guard")
    return [result["flagged"] for result in data["results"]]


async def test_the_guard_flags_the_trigger_anywhere(client):
    assert await verdicts(client, ["hello", "please flag-me"]) == [False, True]
    assert await verdicts(client, "flag-me", model=None) == [True]   # the default model, one text
    reply = await client.post("/v1/moderations", json={"input": ["flag-me"]})
    [result] = (await reply.json())["results"]
    assert result["categories"]["violence"] is True and result["categories"]["hate"] is False
    assert result["category_scores"]["violence"] > 0.9 > result["category_scores"]["hate"]


async def test_the_output_guard_flags_answers_only(client):
    assert await verdicts(client, ["flag-me", ANSWER], model="scripted-output-guard") == [False, True]


async def test_refusals(client):
    unknown = await client.post("/v1/moderations", json={"input": "x", "model": "omni-moderation-latest"})
    assert unknown.status == 404
    bad = await client.post("/v1/moderations", json={"input": [1, 2]})
    assert bad.status == 400
    broken = await client.post("/v1/moderations", json={"input": "Scripted reply: break-moderation"})
    assert broken.status == 500 and (await broken.json())["error"]["message"] == "scripted moderation failure"
    # In the user's input (no answer yet) the failure trigger does nothing.
    assert await verdicts(client, "break-moderation") == [False]
