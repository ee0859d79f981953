"""What the gateway serves: `OPERATIONS`, the one list of its routes and of the action
each needs (LCORE's RBAC actions, `authorization.access_rules`). The application refuses
to start with a route that is not listed (`route_actions`), docs/authentication.md's table
of actions is checked against it (`actions_table`), and `/openapi.json` (`openapi.py`) is
built from it, carrying each action as `x-lcore-action`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Iterable


from gateway.config.access import Action
from gateway.schema.conversations import (ConversationAndHistory, ConversationDeletedBoth,
                                          ConversationDeleteResponse, ConversationResponse,
                                          ConversationsListResponse, ConversationsListResponseV2,
                                          ConversationUpdateRequest, ConversationUpdateResponse, OpenAIConversation,
                                          OpenAIConversationCreate, OpenAIConversationItemList,
                                          OpenAIConversationUpdate, OpenAIItemsCreate)
from gateway.schema.feedback import (FeedbackRequest, FeedbackResponse, FeedbackStatus, FeedbackStatusUpdate,
                                     FeedbackStatusUpdateRequest)
from gateway.schema.api import (AuthorizedResponse, InfoResponse, InputItemList, LivenessResponse,
                                ModelsResponse, ReadinessResponse, ResponseDeleted)
from gateway.schema.quota_api import QuotaChange, QuotasResponse, UsageReport
from gateway.schema.responses_request import ResponsesRequest

class Later:
    """A model OPERATIONS names whose module loads the `openai` types (~20 MiB of RSS):
    imported when the document is first built, not at start-up. `__name__` is all the
    operations need of it until then."""

    def __init__(self, module: str, name: str):
        self.module, self.__name__ = module, name

    def load(self) -> Any:
        return getattr(importlib.import_module(self.module), self.__name__)


GatewayResponse = Later("gateway.schema.api_response", "GatewayResponse")
STREAM_EVENT = Later("openai.types.responses", "ResponseStreamEvent")
QUERY_REQUEST = Later("gateway.legacy.request", "QueryRequest")
INFER_REQUEST = Later("gateway.legacy.infer", "InferRequest")
COMPACT_REQUEST = Later("gateway.compaction.window", "CompactRequest")
COMPACTED = Later("gateway.schema.compaction_api", "CompactedWindow")

_PAGE = (("limit", "How many conversations (1-1000; default all)"),
         ("after", "A conversation id: only those listed after it"))

# The action of a route any authenticated caller may use (LCORE's `POST /authorized`).
AUTHENTICATED_ONLY = "authenticated only"


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    path: str
    summary: str
    tag: str
    ok: Any = None                       # the 200 body's model (JSON)
    request: Any = None                  # the JSON request body's model
    stream: bool = False                 # 200 may also be `text/event-stream`
    errors: tuple[int, ...] = (401, 500)
    public: bool = False                 # answered without authentication
    html: bool = False                   # 200 is a text/html page
    text: bool = False                   # 200 is text/plain (Prometheus's format)
    lcore_stream: bool = False           # 200 is LCORE's `data: {"event", "data"}` frames, or text/plain
    query: tuple[tuple[str, str], ...] = ()    # (name, description)
    path_params: tuple[str, ...] = field(default=())
    # Required: the action a caller's roles must grant (LCORE's for LCORE's routes, its
    # nearest for the others), or AUTHENTICATED_ONLY.
    action: str = field(kw_only=True)
    note: str = field(default="", kw_only=True)   # why this action, for the docs' table
    # Open to every authenticated caller when no `access_rules` are configured (LCORE's
    # resolver allows every action then); with rules, `action` applies as always.
    open_without_rules: bool = field(default=False, kw_only=True)


OPERATIONS: tuple[Operation, ...] = (
    Operation("create_response", "post", "/v1/responses",
              "Create a response (JSON, or SSE with `stream: true`)", "responses",
              ok=GatewayResponse, request=ResponsesRequest, stream=True,
              errors=(400, 401, 403, 404, 409, 413, 422, 429, 500, 503), action=Action.RESPONSES,
              note="LCORE's; naming a model also needs `model_override`, another user's conversation "
                   "`query_other_conversations`"),
    Operation("compact_response", "post", "/v1/responses/compact",
              "Compact a conversation's window into its user messages and one opaque `compaction` item",
              "responses", ok=COMPACTED, request=COMPACT_REQUEST,
              errors=(400, 401, 403, 404, 413, 422, 429, 500, 501, 503), action=Action.RESPONSES,
              note="not in LCORE (OpenResponses'): a turn of `responses`, charged like one"),
    Operation("list_responses", "get", "/v1/responses",
              "The caller's stored responses, a cursor page (engine mode)", "responses",
              errors=(401, 403, 404, 422, 500, 501), action=Action.RESPONSES, note="not in LCORE: its nearest action",
              query=(("after", "A response id to list after"), ("limit", "How many responses (1-100, default 20)"),
                     ("order", "`asc` or `desc` (default) by creation"))),
    Operation("get_response", "get", "/v1/responses/{response_id}",
              "Retrieve one of the caller's responses; a background one also as its stream", "responses",
              ok=GatewayResponse, stream=True, errors=(401, 403, 404, 422, 500, 503), path_params=("response_id",),
              action=Action.RESPONSES, note="not in LCORE: its nearest action",
              query=(("stream", "`true`: a background response's events (replayed, then live, to its end)"),
                     ("starting_after", "With `stream`: only the events after this sequence number"))),
    Operation("cancel_response", "post", "/v1/responses/{response_id}/cancel",
              "Cancel one of the caller's background responses", "responses",
              ok=GatewayResponse, errors=(401, 403, 404, 409, 500, 503), path_params=("response_id",),
              action=Action.RESPONSES, note="not in LCORE: its nearest action"),
    Operation("delete_response", "delete", "/v1/responses/{response_id}",
              "Delete one of the caller's responses", "responses",
              ok=ResponseDeleted, errors=(401, 403, 404, 500, 503), path_params=("response_id",),
              action=Action.RESPONSES, note="not in LCORE: its nearest action"),
    Operation("list_input_items", "get", "/v1/responses/{response_id}/input_items",
              "The input items of one of the caller's responses", "responses",
              ok=InputItemList, errors=(401, 403, 404, 500, 503), path_params=("response_id",),
              action=Action.RESPONSES, note="not in LCORE: its nearest action",
              query=(("after", "An item id to list after"), ("before", "An item id to list before"),
                     ("include", "Additional fields to include"), ("limit", "How many items (1-100)"),
                     ("order", "`asc` or `desc`"))),
    Operation("query", "post", "/v1/query", "LCORE's legacy query (JSON `QueryResponse`)", "query",
              request=QUERY_REQUEST,
              errors=(401, 403, 404, 413, 422, 429, 500, 503), action=Action.QUERY,
              note="LCORE's; any `provider`/`model` also needs `model_override`, another user's conversation "
                   "`query_other_conversations`"),
    Operation("streaming_query", "post", "/v1/streaming_query",
              "LCORE's legacy streaming query (`data: {\"event\", \"data\"}` frames, or text/plain)", "query",
              request=QUERY_REQUEST, lcore_stream=True,
              errors=(401, 403, 404, 422, 429, 500, 503), action=Action.STREAMING_QUERY,
              note="LCORE's; as `/v1/query`"),
    Operation("interrupt_streaming_query", "post", "/v1/streaming_query/interrupt",
              "Stop one of the caller's running streaming queries", "query",
              errors=(401, 403, 404, 422, 500), action=Action.STREAMING_QUERY, note="LCORE's"),
    Operation("infer", "post", "/v1/infer",
              "LCORE's rlsapi v1 stateless question of the RHEL command-line assistant (`{\"data\": {\"text\", "
              "\"request_id\"}}`)", "query", request=INFER_REQUEST,
              errors=(401, 403, 404, 413, 422, 429, 500, 503), action=Action.RLSAPI_V1_INFER, note="LCORE's"),
    Operation("list_tools", "get", "/v1/tools",
              "LCORE's tool catalogue: the built-in file-search tools and the configured MCP servers' tools",
              "tools", errors=(401, 403, 422, 500), action=Action.GET_TOOLS,
              note="LCORE's; a configured MCP server that needs OAuth is a 401 with its challenge"),
    Operation("mcp_client_auth_options", "get", "/v1/mcp-auth/client-options",
              "Which configured MCP servers take headers from the client (`MCP-HEADERS`)", "tools",
              errors=(401, 403, 500), action=Action.GET_TOOLS, note="LCORE's"),
    Operation("list_shields", "get", "/v1/shields", "LCORE's configured shields (`question_validity`, `redaction`)",
              "tools", errors=(401, 403, 500), action=Action.GET_SHIELDS, note="LCORE's"),
    Operation("list_providers", "get", "/v1/providers",
              "The upstream's providers grouped by API (LCORE's `{\"providers\": {api: [{provider_id, "
              "provider_type}]}}`)", "providers", errors=(401, 403, 500, 501, 503), action=Action.LIST_PROVIDERS,
              note="LCORE's; 501 when the upstream has no providers API"),
    Operation("get_provider", "get", "/v1/providers/{provider_id}",
              "One upstream provider: its `api`, `config`, `health`, `provider_id` and `provider_type`", "providers",
              errors=(401, 403, 404, 500, 501, 503), path_params=("provider_id",), action=Action.GET_PROVIDER,
              note="LCORE's"),
    Operation("get_config", "get", "/v1/config",
              "The running configuration (`{\"configuration\": ...}`), every secret as `**********`", "info",
              errors=(401, 403, 500), action=Action.GET_CONFIG, note="LCORE's"),
    Operation("list_conversations", "get", "/v1/conversations",
              "The caller's conversations, newest first (LCORE's `{\"conversations\": [...]}`)", "conversations",
              ok=ConversationsListResponse, errors=(400, 401, 403, 422, 500), action=Action.LIST_CONVERSATIONS,
              query=_PAGE,
              note="LCORE's; every user's with `list_other_conversations`; `limit`/`after` are ours"),
    Operation("create_conversation", "post", "/v1/conversations",
              "Create a conversation (OpenAI's Conversations API), with up to 20 items and 16 metadata pairs",
              "conversations", ok=OpenAIConversation, request=OpenAIConversationCreate,
              errors=(401, 403, 422, 500, 503), action=Action.RESPONSES,
              note="OpenAI's (not in LCORE): its nearest action, a conversation being for `responses`"),
    Operation("get_conversation", "get", "/v1/conversations/{conversation_id}",
              "One conversation: OpenAI's `Conversation` and LCORE's `chat_history`, from the gateway's turn store",
              "conversations", ok=ConversationAndHistory, errors=(400, 401, 403, 404, 500, 503), path_params=("conversation_id",),
              action=Action.GET_CONVERSATION, note="LCORE's; another user's needs `read_other_conversations`"),
    Operation("update_conversation", "put", "/v1/conversations/{conversation_id}",
              "Rename a conversation (its topic summary)", "conversations",
              ok=ConversationUpdateResponse, request=ConversationUpdateRequest,
              errors=(400, 401, 403, 404, 422, 500, 503), path_params=("conversation_id",),
              action=Action.UPDATE_CONVERSATION, note="LCORE's; another user's needs `query_other_conversations`"),
    Operation("update_conversation_metadata", "post", "/v1/conversations/{conversation_id}",
              "Replace a conversation's metadata (OpenAI's Conversations API)", "conversations",
              ok=OpenAIConversation, request=OpenAIConversationUpdate,
              errors=(400, 401, 403, 404, 422, 500), path_params=("conversation_id",),
              action=Action.UPDATE_CONVERSATION, note="OpenAI's; as LCORE's rename (`PUT`)"),
    Operation("list_conversation_items", "get", "/v1/conversations/{conversation_id}/items",
              "A conversation's items, a cursor page (OpenAI's Conversations API)", "conversations",
              ok=OpenAIConversationItemList, errors=(400, 401, 403, 404, 422, 500, 503),
              path_params=("conversation_id",), action=Action.GET_CONVERSATION,
              note="OpenAI's; as LCORE's `GET` of the conversation",
              query=(("after", "An item id to list after"), ("limit", "How many items (1-100, default 20)"),
                     ("order", "`asc` or `desc` (default)"), ("include[]", "Accepted; items carry everything"))),
    Operation("create_conversation_items", "post", "/v1/conversations/{conversation_id}/items",
              "Add up to 20 items to a conversation (its next turn's input)", "conversations",
              ok=OpenAIConversationItemList, request=OpenAIItemsCreate,
              errors=(400, 401, 403, 404, 422, 500, 503), path_params=("conversation_id",),
              action=Action.UPDATE_CONVERSATION, note="OpenAI's; as LCORE's rename (`PUT`)"),
    Operation("get_conversation_item", "get", "/v1/conversations/{conversation_id}/items/{item_id}",
              "One item of a conversation (OpenAI's Conversations API)", "conversations",
              errors=(400, 401, 403, 404, 500, 503), path_params=("conversation_id", "item_id"),
              action=Action.GET_CONVERSATION, note="OpenAI's; as LCORE's `GET` of the conversation"),
    Operation("delete_conversation_item", "delete", "/v1/conversations/{conversation_id}/items/{item_id}",
              "Delete one item of a conversation; answers the conversation", "conversations",
              ok=OpenAIConversation, errors=(400, 401, 403, 404, 500, 503),
              path_params=("conversation_id", "item_id"), action=Action.UPDATE_CONVERSATION,
              note="OpenAI's; changes the conversation, as LCORE's rename (`PUT`)"),
    Operation("delete_conversation", "delete", "/v1/conversations/{conversation_id}",
              "Delete a conversation, upstream and everything the gateway stored for it (always 200)",
              "conversations", ok=ConversationDeletedBoth, errors=(400, 401, 403, 500),
              path_params=("conversation_id",), action=Action.DELETE_CONVERSATION,
              note="LCORE's; another user's needs `delete_other_conversations`"),
    Operation("list_conversations_v2", "get", "/v2/conversations",
              "The caller's conversations (LCORE's v2 shape; needs `conversation_cache`)", "conversations",
              ok=ConversationsListResponseV2, errors=(400, 401, 403, 422, 500), action=Action.LIST_CONVERSATIONS,
              query=_PAGE, note="LCORE's; served from the gateway's store, without the upstream"),
    Operation("get_conversation_v2", "get", "/v2/conversations/{conversation_id}",
              "One of the caller's conversations (`chat_history`; needs `conversation_cache`)", "conversations",
              ok=ConversationResponse, errors=(400, 401, 403, 404, 500), path_params=("conversation_id",),
              action=Action.GET_CONVERSATION, note="LCORE's; another user's is a 404"),
    Operation("update_conversation_v2", "put", "/v2/conversations/{conversation_id}",
              "Rename one of the caller's conversations (needs `conversation_cache`)", "conversations",
              ok=ConversationUpdateResponse, request=ConversationUpdateRequest,
              errors=(400, 401, 403, 404, 422, 500), path_params=("conversation_id",),
              action=Action.UPDATE_CONVERSATION, note="LCORE's; another user's is a 404"),
    Operation("delete_conversation_v2", "delete", "/v2/conversations/{conversation_id}",
              "Delete one of the caller's conversations (always 200; needs `conversation_cache`)", "conversations",
              ok=ConversationDeleteResponse, errors=(400, 401, 403, 500), path_params=("conversation_id",),
              action=Action.DELETE_CONVERSATION, note="LCORE's; another user's is `deleted: false`"),
    Operation("feedback", "post", "/v1/feedback", "Feedback on an answer in one of the caller's conversations",
              "feedback", ok=FeedbackResponse, request=FeedbackRequest, errors=(401, 403, 404, 422, 500),
              action=Action.FEEDBACK, note="LCORE's; another user's conversation is a 403 whatever the roles"),
    Operation("feedback_status", "get", "/v1/feedback/status", "Whether feedback is enabled", "feedback",
              ok=FeedbackStatus, errors=(500,), public=True, action=Action.INFO,
              note="as LCORE: no authentication; the switch is in the database, so every replica agrees"),
    Operation("update_feedback_status", "put", "/v1/feedback/status", "Enable or disable feedback", "feedback",
              ok=FeedbackStatusUpdate, request=FeedbackStatusUpdateRequest, errors=(401, 403, 422, 500),
              action=Action.ADMIN, open_without_rules=True,
              note="LCORE's; any authenticated caller when no `access_rules` are configured, as LCORE"),
    Operation("list_models", "get", "/v1/models",
              "The upstream's models, in LCORE's and OpenAI's shapes at once", "models",
              ok=ModelsResponse, errors=(401, 403, 500, 503), action=Action.GET_MODELS,
              query=(("model_type", "Only models of this type (e.g. `llm`)"),)),
    Operation("info", "get", "/v1/info", "Service name and versions", "info",
              ok=InfoResponse, errors=(401, 403, 500, 503), action=Action.INFO),
    # Probes authenticate unless `skip_for_health_probes` lets requests without credentials through.
    Operation("liveness", "get", "/liveness", "Liveness probe", "health",
              ok=LivenessResponse, errors=(401, 403), action=Action.INFO,
              note="without a credential header and `skip_for_health_probes`: neither checked"),
    Operation("readiness", "get", "/readiness",
              "Readiness probe (503 when the upstream or the database is not usable)", "health",
              ok=ReadinessResponse, errors=(401, 403, 503), action=Action.INFO,
              note="without a credential header and `skip_for_health_probes`: neither checked"),
    Operation("get_metrics", "get", "/metrics",
              "This process's metrics in Prometheus's text format (when `service.metrics` is on)", "health",
              text=True, errors=(401, 403), action=Action.GET_METRICS,
              note="without a credential header and `skip_for_metrics`: neither checked"),
    Operation("openapi", "get", "/openapi.json", "This document", "info", errors=(), public=True,
              action=Action.INFO, note="as FastAPI's document in LCORE"),
    Operation("landing_page", "get", "/", "A landing page", "info", html=True, errors=(401, 403),
              action=Action.INFO),
    Operation("own_quotas", "get", "/v1/quotas", "The caller's quota limiters and balances", "quotas",
              ok=QuotasResponse, errors=(401, 500, 503), action=AUTHENTICATED_ONLY,
              note="not in LCORE (its issue #542): every caller sees their own balances"),
    Operation("quota_usage", "get", "/v1/quotas/usage",
              "Token usage per user, provider and model over UTC days (the token history)", "quotas",
              ok=UsageReport, errors=(401, 403, 422, 500, 503), action=Action.ADMIN, note="not in LCORE",
              query=(("start", "First UTC day, YYYY-MM-DD (default: 29 days before end)"),
                     ("end", "Last UTC day, YYYY-MM-DD (default: today)"), ("user_id", "Only this user"))),
    Operation("get_cluster_quotas", "get", "/v1/quotas/cluster", "The cluster limiters' balances", "quotas",
              ok=QuotasResponse, errors=(401, 403, 500, 503), action=Action.ADMIN, note="not in LCORE"),
    Operation("set_cluster_quotas", "put", "/v1/quotas/cluster", "Set cluster limiters' balances (audited)",
              "quotas", ok=QuotasResponse, request=QuotaChange, errors=(401, 403, 422, 500, 503),
              action=Action.ADMIN, note="not in LCORE"),
    Operation("add_cluster_quotas", "post", "/v1/quotas/cluster/increments",
              "Add tokens to cluster limiters (idempotent with `Idempotency-Key`; audited)", "quotas",
              ok=QuotasResponse, request=QuotaChange, errors=(400, 401, 403, 422, 500, 503), action=Action.ADMIN,
              note="not in LCORE"),
    Operation("get_user_quotas", "get", "/v1/quotas/users/{user_id}", "A user's limiters' balances", "quotas",
              ok=QuotasResponse, errors=(401, 403, 500, 503), path_params=("user_id",), action=Action.ADMIN,
              note="not in LCORE"),
    Operation("set_user_quotas", "put", "/v1/quotas/users/{user_id}", "Set a user's balances (audited)",
              "quotas", ok=QuotasResponse, request=QuotaChange, errors=(401, 403, 422, 500, 503),
              path_params=("user_id",), action=Action.ADMIN, note="not in LCORE"),
    Operation("add_user_quotas", "post", "/v1/quotas/users/{user_id}/increments",
              "Add tokens to a user's limiters (idempotent with `Idempotency-Key`; audited)", "quotas",
              ok=QuotasResponse, request=QuotaChange, errors=(400, 401, 403, 422, 500, 503),
              path_params=("user_id",), action=Action.ADMIN, note="not in LCORE"),
    Operation("authorized", "post", "/authorized", "Who the gateway authenticated the caller as", "auth",
              ok=AuthorizedResponse, errors=(401, 500), action=AUTHENTICATED_ONLY,
              note="LCORE's: authentication only"),
)


class RouteWithoutAction(RuntimeError):
    """A route is served that `OPERATIONS` does not list: it would have no action."""


def route_actions(routes: Iterable[Any], root_path: str = "", rules_configured: bool = True) -> dict[Any, str]:
    """Each registered aiohttp route → its action (HEAD as its GET). Raises at start-up
    for a route that has none, so no route is ever served unchecked. Without configured
    `access_rules`, an `open_without_rules` route needs authentication only."""
    declared = {(operation.method, operation.path): AUTHENTICATED_ONLY
                if operation.open_without_rules and not rules_configured else operation.action
                for operation in OPERATIONS}
    table: dict[Any, str] = {}
    for route in routes:
        path = route.resource.canonical if route.resource is not None else ""
        if root_path and path.startswith(root_path + "/"):
            path = path[len(root_path):]
        elif root_path and path == root_path + "/":
            path = "/"
        method = "get" if route.method == "HEAD" else route.method.lower()
        if (method, path) not in declared:
            raise RouteWithoutAction(f"{method.upper()} {path} is served but has no action in "
                                     "gateway/http/operations.py OPERATIONS")
        table[route] = declared[method, path]
    return table


def actions_table() -> str:
    """The table of routes in docs/authentication.md and their actions, made from `OPERATIONS` (a test
    keeps that page equal to it)."""
    lines = ["| route | action | |", "|---|---|---|"]
    for operation in OPERATIONS:
        note = "; ".join(part for part in ("public: no authentication" if operation.public else "",
                                             operation.note) if part)
        lines.append(f"| `{operation.method.upper()} {operation.path}` | `{operation.action}` | {note} |")
    return "\n".join(lines)
