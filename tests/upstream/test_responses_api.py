"""The forward backend's upstream calls, with the gateway's own client against a small
aiohttp upstream on loopback: a created response must be a response object, conversations
are learnt absent once, a conversation's upstream state that is already gone is no error,
only a listing's own parameters go upstream, ids are quoted into paths, and a stream's
refusal before its first byte is the mapped error while a break after it is
`StreamBroken`. (Through `gateway serve`: tests/e2e/test_endpoints.py, test_streaming.py.)"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from gateway.config import LlamaStackConfig
from gateway.schema.errors import ApiError
from gateway.upstream.capabilities import Capabilities
from gateway.upstream.client import UpstreamClient
from gateway.upstream.responses_api import StreamBroken, UpstreamResponses

RESPONSE = {"id": "resp_1", "object": "response", "status": "completed", "output": []}


@pytest.fixture
async def upstream(aiohttp_server):
    """`answers[(method, path)]`: a handler's reply; `seen`: (method, path_qs, body)."""
    seen: list[tuple[str, str, bytes]] = []
    answers: dict[tuple[str, str], web.StreamResponse] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append((request.method, request.raw_path, await request.read()))
        answer = answers.get((request.method, request.path))
        if callable(answer):
            return await answer(request)
        return answer if answer is not None else web.json_response({"detail": "Not Found"}, status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/"), answers, seen


@pytest.fixture
async def backend(upstream):
    url, answers, seen = upstream
    config = LlamaStackConfig(url=url)
    client = UpstreamClient(config)
    await client.start()
    yield UpstreamResponses(client, Capabilities(client, config)), answers, seen
    await client.close()


async def test_a_created_response_must_be_a_response_object(backend):
    responses, answers, seen = backend
    answers[("POST", "/v1/responses")] = web.json_response(RESPONSE)
    assert await responses.create({"input": "hi"}, {}, "m") == RESPONSE
    assert seen[0][2] == b'{"input":"hi"}'
    for bad in (web.Response(text="<html>"), web.json_response({"object": "list"})):
        answers[("POST", "/v1/responses")] = bad
        with pytest.raises(ApiError) as refused:
            await responses.create({}, {}, "m")
        assert refused.value.status == 500 and refused.value.code == "upstream_bad_response"
    answers[("POST", "/v1/responses")] = web.json_response({"detail": "bad tools"}, status=400)
    with pytest.raises(ApiError) as mapped:
        await responses.create({}, {}, "m")
    assert mapped.value.status == 400 and mapped.value.cause == "bad tools"


async def test_an_upstream_without_conversations_is_learnt_once(backend):
    responses, answers, seen = backend
    assert await responses.create_conversation() is None   # 404: the gateway keeps them
    assert await responses.create_conversation() is None
    assert [path for _, path, _ in seen] == ["/v1/conversations"]
    assert responses.capabilities.conversations_upstream is False


async def test_an_upstream_with_conversations(backend):
    responses, answers, seen = backend
    answers[("POST", "/v1/conversations")] = web.json_response({"id": "conv_9", "object": "conversation"})
    assert await responses.create_conversation() == "conv_9"
    assert responses.capabilities.conversations_upstream is True


async def test_state_already_gone_upstream_is_no_error_but_a_failure_is(backend):
    responses, answers, seen = backend
    await responses.rename_conversation("conv/1", "a title")     # 404: fine
    await responses.delete_conversation("conv/1", ("resp 1",))    # both 404: fine
    assert [(method, path) for method, path, _ in seen] == [
        ("POST", "/v1/conversations/conv%2F1"), ("DELETE", "/v1/conversations/conv%2F1"),
        ("DELETE", "/v1/responses/resp%201")]
    answers[("DELETE", "/v1/responses/resp_2")] = web.json_response({"detail": "boom"}, status=500)
    with pytest.raises(ApiError) as failed:
        await responses.delete_conversation(None, ("resp_2",))
    assert failed.value.status == 500


async def test_only_the_listings_own_parameters_go_upstream(backend):
    responses, answers, seen = backend
    answers[("GET", "/v1/responses/resp_1/input_items")] = web.json_response({"data": []})
    body = await responses.input_items("resp_1", {"limit": "5", "order": "asc", "user_id": "someone-else",
                                                  "api_key": "x"})
    assert body == b'{"data": []}'
    assert seen[0][1] == "/v1/responses/resp_1/input_items?limit=5&order=asc"


async def test_a_stream_refused_before_its_first_byte_is_the_mapped_error(backend):
    responses, answers, _ = backend
    answers[("POST", "/v1/responses")] = web.json_response({"error": {"message": "no such model"}}, status=404)
    with pytest.raises(ApiError) as refused:
        async with responses.stream({}, {}, "m"):
            pass
    assert refused.value.status == 404


async def test_a_stream_is_its_reads_and_a_break_after_it_began_is_stream_broken(backend):
    responses, answers, _ = backend

    async def events(request: web.Request) -> web.StreamResponse:
        reply = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await reply.prepare(request)
        await reply.write(b'data: {"type":"response.created"}\n\n')
        await asyncio.sleep(0.05)
        await reply.write(b'data: {"type":"response.completed"}\n\n')
        return reply

    answers[("POST", "/v1/responses")] = events
    async with responses.stream({}, {}, "m") as chunks:
        received = b"".join([chunk async for chunk in chunks])
    assert received == b'data: {"type":"response.created"}\n\ndata: {"type":"response.completed"}\n\n'

    async def broken(request: web.Request) -> web.StreamResponse:
        reply = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await reply.prepare(request)
        await reply.write(b'data: {"type":"response.created"}\n\n')
        request.transport.close()   # the upstream dies mid-stream
        return reply

    answers[("POST", "/v1/responses")] = broken
    with pytest.raises(StreamBroken):
        async with responses.stream({}, {}, "m") as chunks:
            async for _ in chunks:
                pass
