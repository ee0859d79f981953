"""The name of a JSON object the gateway relays as it comes.

`JsonObject` is a JSON object of the Responses API read from or written to the wire as
the gateway passes it on: a request body, a response, a stream event's data, an item.
The gateway reads a few of its fields and forwards the rest untouched, so it stays a
plain dict (no validation or copy on the hot path); the name says so where such a value
crosses a package. Values the gateway builds and reads field by field have TypedDicts
of their own (e.g. `schema/errors.ErrorBody`, `quota/admin.Quotas`).
"""

from __future__ import annotations

from typing import Any, TypeAlias

JsonObject: TypeAlias = dict[str, Any]
