"""`Preparer.check` and `Preparer.prepare` (`turns/prepare.py`): what `check()` found is
handed to `prepare()` of the same body for the same user, which does not validate it
again (a WebSocket turn that runs as it arrives); any other body or user is checked
again (with the fakes of `test_life.py`)."""

from __future__ import annotations

from dataclasses import replace

from gateway.turns import prepare as prepare_module
from tests.turns.test_life import USER, life, store  # noqa: F401  (the fixture)


async def test_a_checked_body_is_validated_once_and_only_for_itself(store, monkeypatch):  # noqa: F811
    turns = life(store)
    parsed: list[object] = []
    real = prepare_module.parse_responses_request
    monkeypatch.setattr(prepare_module, "parse_responses_request",
                        lambda raw, *args, **kwargs: parsed.append(raw) or real(raw, *args, **kwargs))
    raw = {"input": "hello", "stream": True}
    checked = await turns.preparer.check(USER, raw)
    assert parsed == [raw]
    turn = await turns.preparer.prepare(USER, raw, {}, checked=checked)
    assert parsed == [raw] and turn.question == "hello"
    # Another body (a WebSocket continuation's, with the held context) or another user:
    # checked again.
    other = {**raw, "input": "again"}
    assert (await turns.preparer.prepare(USER, other, {}, checked=checked)).question == "again"
    assert parsed == [raw, other]
    again = await turns.preparer.check(USER, raw)
    await turns.preparer.prepare(replace(USER, user_id="bob"), raw, {}, checked=again)
    assert parsed == [raw, other, raw, raw]
