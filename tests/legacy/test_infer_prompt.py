"""The system prompt of `/v1/infer`: the operator's template rendered with the date and
the client's system, in a sandbox; a bad or unsafe template is a generic 500."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from gateway.legacy.infer_prompt import InferPrompt
from gateway.schema.errors import ApiError


def test_template_renders_date_and_system_info():
    prompt = InferPrompt("On {{ date }}: {{ os }} {{ version }} {{ arch }}")
    when = datetime(2026, 11, 26, tzinfo=timezone.utc)
    assert prompt.render("RHEL", "9.4", "x86_64", when) == "On November 26, 2026: RHEL 9.4 x86_64"
    assert InferPrompt("No markers here.").render("", "", "") == "No markers here."


@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__ }}",            # the sandbox refuses Python internals
    "{% if %}",                              # not a template at all
])
def test_a_bad_or_unsafe_template_is_a_generic_500(source):
    with pytest.raises(ApiError) as refused:
        InferPrompt(source).render("RHEL", "9", "x86_64")
    assert refused.value.status == 500 and refused.value.cause == \
        "An unexpected error occurred while processing the request."
