"""The system prompt of `/v1/infer` (LCORE's `_build_instructions`): the configured
prompt rendered as a Jinja2 template in Jinja2's sandbox, with `date` (`November 26,
2026`, UTC) and the client's `os`, `version` and `arch`. A prompt without template
markers passes unchanged.

The sandbox is the point: the template is the operator's, but the values are the
client's, and a sandboxed template cannot reach Python attributes whatever it is given.
Jinja2 is imported on the first inference, not at start-up (`tests/test_startup_imports.py`).
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from gateway.schema.errors import internal_error

log = logging.getLogger("gateway.legacy.infer")


class InferPrompt:
    def __init__(self, source: str):
        self._source = source
        self._template: Any = None

    def _compiled(self) -> Any:
        if self._template is None:
            import jinja2
            from jinja2.sandbox import SandboxedEnvironment

            try:
                self._template = SandboxedEnvironment().from_string(self._source)
            except jinja2.TemplateSyntaxError as exc:
                # LCORE's answer: the operator's mistake is a generic 500, its reason logged.
                log.error("customization.system_prompt is not a valid Jinja2 template: %s", exc)
                raise internal_error() from None
        return self._template

    def render(self, os: str, version: str, arch: str, now: datetime | None = None) -> str:
        import jinja2

        date = (now or datetime.now(timezone.utc)).strftime("%B %d, %Y")
        try:
            return str(self._compiled().render(date=date, os=os, version=version, arch=arch))
        except jinja2.TemplateError as exc:   # the sandbox refused something, or a runtime error
            log.error("rendering customization.system_prompt for /v1/infer failed: %s", exc)
            raise internal_error() from None
