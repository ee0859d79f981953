"""A request's MCP tools before its first round: `allowed_tools` in each form, which
calls need approval, the echoed filter in OpenAI's form, and approval responses
resolved against the history (422 for one that answers nothing, or twice)."""

from __future__ import annotations

import pytest

from gateway.engine.mcp_tools import allowed_names, approvals_of, echoed, needs_approval
from gateway.schema.errors import ApiError


@pytest.mark.parametrize("allowed, expected", [
    (None, None), (["a", "b"], frozenset({"a", "b"})), ({"tool_names": ["a"]}, frozenset({"a"})), ([], frozenset()),
])
def test_allowed_tools_forms(allowed, expected):
    assert allowed_names(allowed) == expected


@pytest.mark.parametrize("approval, name, expected", [
    ("never", "add", False), ("always", "add", True), (None, "add", False),
    ({"always": ["add"], "never": ["echo"]}, "add", True), ({"always": ["add"], "never": ["echo"]}, "echo", False),
    ({"always": ["add"]}, "other", True), ({"never": ["echo"]}, "echo", False),
])
def test_which_calls_need_approval(approval, name, expected):
    assert needs_approval({"require_approval": approval}, name) is expected


def test_an_echoed_filter_takes_the_openai_form_and_is_a_copy():
    tool = {"type": "mcp", "server_label": "calc", "require_approval": {"always": ["add"], "never": []}}
    assert echoed(tool)["require_approval"] == {"always": {"tool_names": ["add"]}}
    plain = {"type": "mcp", "server_label": "calc", "authorization": "t"}
    assert echoed(plain) == plain and echoed(plain) is not plain


REQUEST = {"id": "mcpr_1", "type": "mcp_approval_request", "server_label": "calc", "name": "add", "arguments": "{}"}
TOOLS = [{"type": "mcp", "server_label": "calc"}]


def answer(request_id="mcpr_1", approve=True):
    return {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": approve}


def test_approvals_resolve_against_the_history():
    assert approvals_of([answer(approve=False)], [REQUEST], TOOLS) == [(REQUEST, False)]


@pytest.mark.parametrize("inputs, history, tools, says", [
    ([answer("mcpr_x")], [REQUEST], TOOLS, "no pending approval request"),
    ([answer()], [REQUEST, answer()], TOOLS, "already answered"),
    ([answer()], [REQUEST, {"type": "mcp_call", "approval_request_id": "mcpr_1"}], TOOLS, "already answered"),
    ([answer(), answer()], [REQUEST], TOOLS, "already answered"),
    ([answer()], [REQUEST], [], "do not include"),
])
def test_bad_approvals_are_422(inputs, history, tools, says):
    with pytest.raises(ApiError) as raised:
        approvals_of(inputs, history, tools)
    assert raised.value.status == 422 and raised.value.param == "input" and says in raised.value.cause
