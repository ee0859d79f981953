"""The one error envelope: LCORE's `detail` (an object, or its plain string where LCORE
uses one) and, for OpenAI's SDKs, OpenAI's `error` object beside it; a cause that names
its user shows the id in the body and whatever the logs call the user in a log line.
(Bounded sizes: test_bounds.py.)"""

from __future__ import annotations

import pytest

from gateway.schema.errors import (ApiError, conversation_forbidden, endpoint_forbidden, internal_error,
                                   invalid_api_key, method_not_allowed, model_not_found, not_found,
                                   prompt_too_long, quota_exceeded, route_not_found, too_many_in_progress)


def test_the_body_carries_lcores_detail_and_openais_error():
    error = ApiError(422, "Invalid attribute value", "bad tools", code="invalid_value", param="tools")
    assert error.body(False) == {"detail": {"response": "Invalid attribute value", "cause": "bad tools"}}
    assert error.body() == {"detail": {"response": "Invalid attribute value", "cause": "bad tools"},
                            "error": {"message": "Invalid attribute value: bad tools", "type": "invalid_request_error",
                                      "code": "invalid_value", "param": "tools"}}
    assert str(error) == "422 Invalid attribute value: bad tools"


@pytest.mark.parametrize("status, kind", [
    (400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"),
    (404, "not_found_error"), (429, "rate_limit_error"), (418, "invalid_request_error"),
    (500, "server_error"), (503, "server_error"),
])
def test_openais_type_follows_the_status(status, kind):
    assert ApiError(status, "r", "c", code="x").error_type == kind


def test_a_plain_string_detail_where_lcore_has_one():
    assert route_not_found("/nowhere").body(False) == {"detail": "Not Found"}
    key = invalid_api_key()
    assert key.body(False) == {"detail": "Invalid API Key"} and key.headers == {"WWW-Authenticate": "Bearer"}
    assert method_not_allowed("PUT", "/v1/models", "GET").headers == {"Allow": "GET"}


def test_a_cause_naming_its_user_is_logged_with_the_logs_name_for_them():
    error = endpoint_forbidden("alice@example.com")
    assert error.cause == "User alice@example.com is not authorized to access this endpoint."
    assert error.logged_cause("a1b2c3") == "User a1b2c3 is not authorized to access this endpoint."
    assert error.logged_cause(None) == error.cause
    other = conversation_forbidden("bo", "conv_1", "delete")
    assert other.logged_cause("h") == "User h does not have permission to delete conversation with ID conv_1"
    # A cause without a user is logged as it is.
    assert internal_error().logged_cause("h") == internal_error().cause


def test_not_found_names_the_resource_and_lcores_model_id_drops_the_provider():
    assert not_found("Conversation", "c1", code="x").detail == {
        "response": "Conversation not found", "cause": "Conversation with ID c1 does not exist"}
    assert model_not_found("openai/gpt-x").cause == "Model with ID gpt-x does not exist"
    assert model_not_found(None).cause == "No Model is configured"
    assert prompt_too_long("m").cause == "The input exceeds the context window size of model 'm'."
    assert prompt_too_long(None).cause == "The prompt exceeds the maximum allowed length."


def test_429s_tell_the_client_when_to_retry():
    quota = quota_exceeded("over", 3600, "daily")
    assert quota.status == 429 and quota.code == "insufficient_quota" and quota.limiter == "daily"   # type: ignore[attr-defined]
    # OpenAI's SDKs retry a 429 at once unless told not to.
    assert quota.headers == {"Retry-After": "3600", "x-should-retry": "false"}
    busy = too_many_in_progress("ann", 4, 4)
    assert busy.headers == {"Retry-After": "1"} and busy.cause == "User ann has 4 responses in progress (limit 4)"
