"""`/openapi.json` is built from `OPERATIONS`: each operation carries its action
(`x-lcore-action`). (The document through `gateway serve`, validated: tests/e2e/test_openapi.py.)"""

from __future__ import annotations

from gateway.http.openapi import openapi_document
from gateway.http.operations import AUTHENTICATED_ONLY


def test_the_document_shows_each_operations_action():
    document = openapi_document("x", "0", "")
    assert document["paths"]["/v1/models"]["get"]["x-lcore-action"] == "get_models"
    assert document["paths"]["/authorized"]["post"]["x-lcore-action"] == AUTHENTICATED_ONLY
