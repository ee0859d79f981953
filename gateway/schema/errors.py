"""The one error envelope (DESIGN decision 6).

Every error body is `{"detail": {"response", "cause"}, "error": {"message", "type",
"code", "param"}}`: LCORE clients read `detail` (with LCORE's exact strings), OpenAI
SDKs read `error`. Raise `ApiError` anywhere below the HTTP layer; the middleware
renders it.
"""

from __future__ import annotations

from typing import Any

_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


class ApiError(Exception):
    def __init__(self, status: int, response: str, cause: str, *, code: str,
                 param: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(f"{status} {response}: {cause}")
        self.status = status
        self.response = response
        self.cause = cause
        self.code = code
        self.param = param
        self.headers = headers or {}

    @property
    def error_type(self) -> str:
        return _OPENAI_TYPES.get(self.status, "server_error" if self.status >= 500 else "invalid_request_error")

    def body(self) -> dict[str, Any]:
        return {
            "detail": {"response": self.response, "cause": self.cause},
            "error": {"message": f"{self.response}: {self.cause}", "type": self.error_type,
                      "code": self.code, "param": self.param},
        }


def validation_error(cause: str, *, param: str | None = None, code: str = "invalid_value") -> ApiError:
    return ApiError(422, "Invalid request", cause, code=code, param=param)


def unauthorized(cause: str, code: str = "invalid_credentials") -> ApiError:
    return ApiError(401, "Missing or invalid credentials provided by client", cause, code=code)


def not_found(resource: str, resource_id: str | None, *, code: str, param: str | None = None) -> ApiError:
    cause = (f"{resource} with ID {resource_id} does not exist" if resource_id is not None
             else f"No {resource} is configured")
    return ApiError(404, f"{resource.title()} not found", cause, code=code, param=param)


def conversation_forbidden(user_id: str, conversation_id: str, action: str = "read") -> ApiError:
    return ApiError(403, "User does not have permission to perform this action",
                    f"User {user_id} does not have permission to {action} conversation with ID "
                    f"{conversation_id}", code="conversation_forbidden", param="conversation")


def upstream_unavailable(cause: str) -> ApiError:
    return ApiError(503, "Unable to connect to Llama Stack", cause, code="upstream_unavailable")


def prompt_too_long(model: str | None) -> ApiError:
    cause = (f"The input exceeds the context window size of model '{model}'." if model
             else "The prompt exceeds the maximum allowed length.")
    return ApiError(413, "Prompt is too long", cause, code="context_length_exceeded", param="input")


def body_too_large(limit: int) -> ApiError:
    return ApiError(413, "Request body is too large",
                    f"The request body exceeds the limit of {limit} bytes.", code="request_too_large")


def internal_error(cause: str = "An unexpected error occurred while processing the request.",
                   code: str = "internal_error") -> ApiError:
    return ApiError(500, "Internal server error", cause, code=code)
