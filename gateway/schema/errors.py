"""The one error envelope (docs/architecture.md, decision 3: errors serve two audiences).

An error body always carries `detail` exactly as LCORE gives it for that case: an
object `{"response", "cause"}` (LCORE's `ErrorResponse`), FastAPI's list for request
validation errors, or LCORE's plain string where LCORE uses one. On endpoints OpenAI
SDKs call, it also carries OpenAI's `error` object `{"message", "type", "code",
"param"}` (unless `service.error_body: lcore`). Raise `ApiError` anywhere below the HTTP
layer; the middleware renders it for the route.

Its strings are clipped here (`schema/bounds.py`) and a `detail` list is built bounded
(`error_list.request_validation_error`), so an error body is never larger than
`bounds.MAX_ERROR_BODY_BYTES`, whatever the request quoted into it.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from gateway.schema.bounds import clip

_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    431: "invalid_request_error",
}

class ErrorEntry(TypedDict):
    """One entry of FastAPI's request-validation list (LCORE's 422 `detail`), as
    `schema/error_list.py` renders and bounds it and the checks made outside a model
    build it."""
    type: str
    loc: list[Any]
    msg: str
    input: NotRequired[Any]
    ctx: NotRequired[Any]


Detail = dict[str, str] | list[ErrorEntry] | str


class OpenAIError(TypedDict):
    """OpenAI's `error` object, beside LCORE's `detail` on the endpoints OpenAI SDKs call."""
    message: str
    type: str
    code: str | None
    param: str | None


class ErrorBody(TypedDict):
    """The one error envelope's body: LCORE's `detail`, and OpenAI's `error` unless the
    route serves LCORE's shape alone."""
    detail: Detail
    error: NotRequired[OpenAIError]
# Where a cause names its user (`ApiError(user_id=...)`).
USER = "{user}"

# Bytes (as JSON strings) of what an error says: far past any message of LCORE's.
_RESPONSE_BYTES = 512
_CAUSE_BYTES = 2048
_PARAM_BYTES = 256


class ApiError(Exception):
    # The upstream had the request when it failed (no answer in time, a reset, the
    # gateway's own deadline or shutdown): a turn it ends is charged its reservation.
    upstream_received = False

    def __init__(self, status: int, response: str, cause: str, *, code: str,
                 param: str | None = None, headers: dict[str, str] | None = None, detail: Detail | None = None,
                 user_id: str | None = None):
        # `user_id`: the user the cause names where it says `{user}`. The body shows the
        # id (LCORE's text); a log line shows it as logs name users (`logged_cause`).
        self._template = cause if user_id is not None else None
        cause = cause.replace(USER, user_id) if user_id is not None else cause
        response, cause = clip(response, _RESPONSE_BYTES), clip(cause, _CAUSE_BYTES)
        super().__init__(f"{status} {response}: {cause}")
        self.status = status
        self.response = response
        self.cause = cause
        self.user_id = user_id
        self.code = clip(code, _PARAM_BYTES)
        self.param = clip(param, _PARAM_BYTES) if param is not None else None
        self.headers = headers or {}
        # LCORE's body when it is not `{response, cause}` (a string, or FastAPI's list,
        # bounded where it is built).
        self._detail = clip(detail, _CAUSE_BYTES) if isinstance(detail, str) else detail

    def logged_cause(self, shown: str | None) -> str:
        """The cause with its user named `shown` (a log's name for them) instead."""
        if self._template is None or shown is None:
            return self.cause
        return self._template.replace(USER, shown)

    @property
    def error_type(self) -> str:
        return _OPENAI_TYPES.get(self.status, "server_error" if self.status >= 500 else "invalid_request_error")

    @property
    def detail(self) -> Detail:
        return self._detail if self._detail is not None else {"response": self.response, "cause": self.cause}

    def body(self, openai: bool = True) -> ErrorBody:
        """LCORE's body, with OpenAI's `error` object beside it when `openai`."""
        if not openai:
            return {"detail": self.detail}
        return {"detail": self.detail,
                "error": {"message": f"{self.response}: {self.cause}", "type": self.error_type,
                          "code": self.code, "param": self.param}}


def invalid_attribute(cause: str, *, param: str | None = None, code: str = "invalid_value") -> ApiError:
    """A request the handler refuses after it validated (LCORE's 422 object shape)."""
    return ApiError(422, "Invalid attribute value", cause, code=code, param=param)


def bad_request(message: str, *, param: str | None = None, code: str = "invalid_value") -> ApiError:
    """400 with LCORE's plain-string `detail` (e.g. `user_id cannot be empty`)."""
    return ApiError(400, "Bad request", message, code=code, param=param, detail=message)


def unauthorized(cause: str, code: str = "invalid_credentials", detail: str | None = None) -> ApiError:
    """LCORE's 401; `detail` for the modules whose 401 body is a plain string. Every 401
    carries `WWW-Authenticate: Bearer` (RFC 9110 requires a challenge)."""
    return ApiError(401, "Missing or invalid credentials provided by client", cause, code=code,
                    headers={"WWW-Authenticate": "Bearer"}, detail=detail)


def header_too_large(limit: int) -> ApiError:
    return ApiError(431, "Request header fields too large",
                    f"A request header exceeds the limit of {limit} bytes.", code="request_header_too_large")


def invalid_api_key() -> ApiError:
    """api-key-token's 401: LCORE's body is the plain string."""
    return ApiError(401, "Missing or invalid credentials provided by client", "Invalid API Key",
                    code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"}, detail="Invalid API Key")


def endpoint_forbidden(user_id: str) -> ApiError:
    """The caller's roles do not grant the route's action."""
    return ApiError(403, "User does not have permission to access this endpoint",
                    f"User {USER} is not authorized to access this endpoint.", code="endpoint_forbidden",
                    user_id=user_id)


def model_override_forbidden() -> ApiError:
    return ApiError(403, "This instance does not permit overriding model/provider in the query request "
                         "(missing permission: model_override). Please remove the model and provider fields "
                         "from your request.",
                    "User lacks model_override permission required to override model/provider.",
                    code="model_override_forbidden", param="model")


def not_found(resource: str, resource_id: str | None, *, code: str, param: str | None = None) -> ApiError:
    cause = (f"{resource} with ID {resource_id} does not exist" if resource_id is not None
             else f"No {resource} is configured")
    return ApiError(404, f"{resource.title()} not found", cause, code=code, param=param)


def model_not_found(model: str | None) -> ApiError:
    """LCORE names the model without its provider: `Model with ID <part after '/'> ...`."""
    shown = model.split("/", 1)[-1] if model is not None else None
    return not_found("Model", shown, code="model_not_found", param="model")


def conversation_forbidden(user_id: str, conversation_id: str, action: str = "read") -> ApiError:
    return ApiError(403, "User does not have permission to perform this action",
                    f"User {USER} does not have permission to {action} conversation with ID "
                    f"{conversation_id}", code="conversation_forbidden", param="conversation", user_id=user_id)


def invalid_conversation_id(conversation_id: str) -> ApiError:
    """LCORE's 400 for a malformed conversation id in a path."""
    return ApiError(400, "Invalid conversation ID format", f"The conversation ID {conversation_id} has invalid format.",
                    code="invalid_conversation_id", param="conversation_id")


def cache_unavailable() -> ApiError:
    """LCORE's 500 on `/v2/conversations` without `conversation_cache`."""
    return ApiError(500, "Conversation cache not configured", "Conversation cache is not configured or unavailable.",
                    code="conversation_cache_not_configured")


def tool_conflict(cause: str) -> ApiError:
    return ApiError(409, "Tool conflict", cause, code="tool_conflict", param="tools")


def upstream_unavailable(backend: str, cause: str = "Connection error.") -> ApiError:
    """LCORE's 503: the cause is what the OpenAI client says (socket details go to the log)."""
    return ApiError(503, f"Unable to connect to {backend}", cause, code="upstream_unavailable")


def shutting_down() -> ApiError:
    """A request the gateway will not finish: it is shutting down (SIGTERM, its grace over)."""
    return ApiError(503, "Shutting down", "The gateway is shutting down.", code="server_shutdown")


def upstream_invalid_conversation_id(upstream_id: str) -> ApiError:
    """The upstream created a conversation under an id the gateway cannot store or name
    back to the client (neither `conv_<48 hex>` nor a UUID): the upstream's fault, 502."""
    return ApiError(502, "Invalid upstream response",
                    f"The upstream created a conversation with the id {upstream_id[:80]!r}, which is neither "
                    "conv_<48 hex> nor a UUID.", code="upstream_invalid_conversation_id")


def upstream_bad_stream(message: str) -> ApiError:
    """A stream whose first event the gateway could not read (not JSON): the upstream's
    fault, 502. It had the turn: charged as one lost before it reported usage."""
    error = ApiError(502, "Invalid upstream response", message, code="upstream_bad_response")
    error.upstream_received = True
    return error


def prompt_too_long(model: str | None) -> ApiError:
    cause = (f"The input exceeds the context window size of model '{model}'." if model
             else "The prompt exceeds the maximum allowed length.")
    return ApiError(413, "Prompt is too long", cause, code="context_length_exceeded", param="input")


def body_too_large(limit: int) -> ApiError:
    return ApiError(413, "Request body is too large",
                    f"The request body exceeds the limit of {limit} bytes.", code="request_too_large")


def route_not_found(path: str) -> ApiError:
    """FastAPI's plain `{"detail": "Not Found"}` for a path no route serves."""
    return ApiError(404, "Not found", f"The path {path} does not exist.", code="not_found", detail="Not Found")


def method_not_allowed(method: str, path: str, allowed: str) -> ApiError:
    return ApiError(405, "Method not allowed", f"{method} is not allowed on {path}.", code="method_not_allowed",
                    headers={"Allow": allowed}, detail="Method Not Allowed")


def database_error() -> ApiError:
    """LCORE's `InternalServerErrorResponse.database_error()` (the database's own message
    goes to the log)."""
    return ApiError(500, "Database query failed", "Failed to query the database", code="database_error")


def internal_error(cause: str = "An unexpected error occurred while processing the request.",
                   code: str = "internal_error") -> ApiError:
    return ApiError(500, "Internal server error", cause, code=code)


class QuotaExceeded(ApiError):
    """A local quota's refusal, naming the limiter that refused (for metrics)."""

    def __init__(self, cause: str, retry_after: int, limiter: str):
        super().__init__(429, "The quota has been exceeded", cause, code="insufficient_quota",
                         headers={"Retry-After": str(retry_after), "x-should-retry": "false"})
        self.limiter = limiter


def quota_exceeded(cause: str, retry_after: int, limiter: str = "") -> ApiError:
    """LCORE's 429 for a local quota; OpenAI's `insufficient_quota`. `Retry-After` is the
    seconds to the refusing limiter's next top-up, and `x-should-retry: false` keeps
    OpenAI's SDKs from retrying at once (they retry 429s by default)."""
    return QuotaExceeded(cause, retry_after, limiter)


def too_many_in_progress(user_id: str, running: int, limit: int) -> ApiError:
    """A user with as many responses running on this replica as the operator allows
    (`service.max_responses_in_progress_per_user`): retry once one ends."""
    return ApiError(429, "Too many requests", f"User {user_id} has {running} responses in progress (limit {limit})",
                    code="rate_limit_exceeded", headers={"Retry-After": "1"})


def quota_storage_unavailable() -> ApiError:
    """Admission cannot be decided: refused (fail closed) in LCORE's 503 shape."""
    return ApiError(503, "Unable to connect to quota storage", "Connection error.", code="quota_storage_unavailable")
