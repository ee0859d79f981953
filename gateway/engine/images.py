"""Engine mode: the `input_image` URLs of a request follow the destination policy
before any upstream is asked to fetch them.

The Chat Completions upstream (vLLM and the like) downloads an `image_url` itself,
from inside the operator's network, so a client's URL is an SSRF vector like a
client's MCP server (`destinations.py`): only `data:` URLs and `https` URLs whose host
is public are taken; loopback, private, link-local, CGNAT, metadata, ... addresses are
refused unless `client_tools.allowed_image_destinations` lists them (CIDRs or exact
host names). A host name is resolved here and every address checked; the upstream
resolves it again, so a name whose answers change between the two can still slip
through (as for forward mode's MCP servers). A refusal is a 400 naming the input part
(`param: input[i].content[j].image_url`), before anything is created.

Only the request's own input is judged: earlier turns' images were judged when they
were sent.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

from gateway.destinations import RESOLVE_TIMEOUT, DestinationPolicy, ForbiddenDestination
from gateway.schema.errors import ApiError

SUBJECT = "input_image"


def image_policy(allowed: list[str]) -> DestinationPolicy:
    return DestinationPolicy.of(allowed, subject=SUBJECT, schemes=("https",))


def image_urls(input_: Any) -> Iterator[tuple[str, Any]]:
    """(param, url) of each `input_image` part in the input's messages and tool outputs."""
    if not isinstance(input_, list):
        return
    for i, item in enumerate(input_):
        if not isinstance(item, dict):
            continue
        for key in ("content", "output"):
            parts = item.get(key)
            if not isinstance(parts, list):
                continue
            for j, part in enumerate(parts):
                if isinstance(part, dict) and part.get("type") == "input_image" and "image_url" in part:
                    url = part["image_url"]
                    yield f"input[{i}].{key}[{j}].image_url", url.get("url") if isinstance(url, dict) else url


async def check_images(input_: Any, policy: DestinationPolicy) -> None:
    """400 for the first `input_image` URL the policy refuses."""
    for param, url in image_urls(input_):
        if not isinstance(url, str) or url[:5].lower() == "data:":
            continue  # inline data, or no URL (translate.py refuses that)
        try:
            host, port = policy.check_url(url)
            if policy.host_allowed(host):
                continue  # the operator trusts the name, whatever it resolves to
            async with asyncio.timeout(RESOLVE_TIMEOUT):
                await policy.resolve(host, port)
        except ForbiddenDestination as refused:
            raise _refused(str(refused), param) from None
        except TimeoutError:
            raise _refused(f"input_image host {host!r} could not be resolved", param) from None


def _refused(cause: str, param: str) -> ApiError:
    return ApiError(400, "Invalid request", cause, code="image_url_forbidden", param=param)
