"""`GET /openapi.json` describes every endpoint (a real OpenAPI 3.1 validator says the
document is valid, and the gateway's own bodies validate against it); `GET /` is a small
landing page."""

from __future__ import annotations

import jsonschema
import pytest
from openapi_spec_validator import validate

from gateway.app import create_app
from gateway.config import parse_config
from gateway.http.operations import OPERATIONS


@pytest.fixture(scope="module")
def guarded(gateway_factory, upstream):
    return gateway_factory(upstream.url, authentication={"module": "noop-with-token"})


@pytest.fixture(scope="module")
def document(guarded):
    reply = guarded.get("/openapi.json")  # public: no credentials needed
    assert reply.status == 200 and reply.headers["content-type"].startswith("application/json")
    return reply.json()


def conforms(document: dict, component: str, body) -> None:
    jsonschema.validate(body, {"$ref": f"#/components/schemas/{component}", "components": document["components"]},
                        cls=jsonschema.Draft202012Validator)


def test_the_document_is_valid_openapi_3_1(document):
    validate(document)
    assert document["openapi"] == "3.1.0" and document["info"]["title"] == "gateway under test"


def test_every_route_is_described():
    app = create_app(parse_config({"name": "x", "llama_stack": {"url": "http://127.0.0.1:1"}}))
    served = {(route.method.lower(), route.resource.canonical) for route in app.router.routes()
              if route.method != "HEAD"}
    assert served == {(operation.method, operation.path) for operation in OPERATIONS}


def test_the_request_schema_is_the_one_requests_are_validated_with(document):
    request = document["components"]["schemas"]["ResponsesRequest"]
    assert request["required"] == ["input"] and request["additionalProperties"] is False
    assert list(request["properties"])[:4] == ["input", "model", "conversation", "include"]


def test_bodies_conform_to_the_document(guarded, document):
    auth = {"Authorization": "Bearer t"}
    conforms(document, "ModelsResponse", guarded.get("/v1/models", headers=auth).json())
    conforms(document, "InfoResponse", guarded.get("/v1/info", headers=auth).json())
    conforms(document, "LivenessResponse", guarded.get("/liveness", headers=auth).json())
    conforms(document, "ReadinessResponse", guarded.get("/readiness", headers=auth).json())
    created = guarded.post("/v1/responses", {"input": "describe yourself"}, headers=auth).json()
    conforms(document, "GatewayResponse", created)
    conforms(document, "GatewayResponse", guarded.get(f"/v1/responses/{created['id']}", headers=auth).json())
    conforms(document, "InputItemList", guarded.get(f"/v1/responses/{created['id']}/input_items",
                                                    headers=auth).json())
    for refused in (guarded.post("/v1/responses", {"bogus": 1}, headers=auth),
                    guarded.post("/v1/responses", {"input": "x"}),
                    guarded.get("/v1/responses/resp_none", headers=auth)):
        assert refused.status >= 400
        conforms(document, "ErrorBody", refused.json())
    conforms(document, "ResponseDeleted", guarded.delete(f"/v1/responses/{created['id']}", headers=auth).json())


def test_a_response_echoing_llama_stacks_tool_values_conforms(guarded, document):
    """A file search's `ranker` is any of Llama Stack's names in a request, where OpenAI's
    type has two literals, an `allowed_tools` choice may leave out its `mode`, a text
    format may have its optional members null: the response echoes them, and the
    document says so."""
    tool = {"type": "file_search", "vector_store_ids": [], "ranking_options": {"ranker": "rrf"}}
    choice = {"type": "allowed_tools", "tools": []}   # `mode` left to its default
    text = {"format": {"type": "text", "name": None, "schema": None, "description": None, "strict": None}}
    created = guarded.post("/v1/responses", {"input": "hi", "tools": [tool], "tool_choice": choice, "text": text},
                           headers={"Authorization": "Bearer t"}).ok()
    assert created["tools"][0]["ranking_options"]["ranker"] == "rrf"
    conforms(document, "GatewayResponse", created)


def test_landing_page(guarded):
    assert guarded.get("/").status == 401  # like every endpoint but the probes and this document
    reply = guarded.get("/", headers={"Authorization": "Bearer t"})
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/html")
    assert b"<h1>gateway under test</h1>" in reply.body and b"/openapi.json" in reply.body


def test_the_compact_operation_is_listed_with_its_action(document):
    operation = document["paths"]["/v1/responses/compact"]["post"]
    assert operation["operationId"] == "compact_response" and operation["x-lcore-action"] == "responses"
    assert {"413", "422", "429", "501"} <= set(operation["responses"])
    request = document["components"]["schemas"]["CompactRequest"]
    assert request["required"] == ["model"] and request["additionalProperties"] is False
    assert operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/CompactedWindow")
