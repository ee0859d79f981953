"""A client's `require_approval` on a server the operator configured: it may only
tighten the operator's (pure).

The order is `never` < a filter < `always`. A filter is Llama Stack's
`{"always": [names], "never": [names]}` (OpenAI's `{"always": {"tool_names": [...]}}`
form is read alike): a tool named in `always` needs approval, one named only in
`never` does not, and one named in neither does (Llama Stack's rule, and the
engine's, `engine/mcp_tools.needs_approval`).

Merged, a tool needs approval when either policy requires it:

- `always` on either side is `always`;
- `never` on one side is the other side's policy (a client's `never` keeps the
  operator's filter; a client's filter tightens the operator's `never`);
- two filters: `always` is the union of both `always` lists, and `never` is what both
  `never` lists name and neither `always` does. So a client's `never` list can never
  take a tool out of the operator's `always`, nor add one the operator did not exempt.
"""

from __future__ import annotations

from typing import Any, cast

Approval = str | dict[str, list[str]]


def tighter(operator: Any, client: Any) -> Approval:
    """The policy a configured server's call runs under: the operator's, tightened by
    the client's (None: the client gave none)."""
    operators = _normal(operator)
    if client is None:
        return operators
    clients = _normal(client)
    if operators == "always" or clients == "always":
        return "always"
    if operators == "never":
        return clients
    if clients == "never":
        return operators
    assert isinstance(operators, dict) and isinstance(clients, dict)
    always = list(dict.fromkeys(operators["always"] + clients["always"]))
    exempt = set(clients["never"]) - set(always)
    return {"always": always, "never": [name for name in operators["never"] if name in exempt]}


def _normal(approval: Any) -> Approval:
    """`always`, `never`, or a filter as two lists of names (anything unknown: `always`)."""
    if approval in ("always", "never"):
        return cast(Approval, approval)
    if approval is None:
        return "never"  # the Responses API's default
    if hasattr(approval, "model_dump"):
        approval = approval.model_dump()
    if not isinstance(approval, dict):
        return "always"
    return {"always": _names(approval.get("always")), "never": _names(approval.get("never"))}


def _names(value: Any) -> list[str]:
    if isinstance(value, dict):
        value = value.get("tool_names")
    return [str(name) for name in value] if isinstance(value, list) else []
