"""A turn's plan (`gateway/turns/turn.py`): frozen, and made by `frozen(PlanDraft(...))`
(the way `prepare()` makes it, cheaper) exactly as `Plan(...)` would make it."""

from __future__ import annotations

import dataclasses

import pytest

from gateway.turns.turn import Plan, PlanDraft, frozen


def _distinct() -> list[object]:
    """A value of its own for every field but the two clocks, in the fields' order (a
    value handed to the wrong field shows)."""
    return [object() for spec in dataclasses.fields(Plan) if spec.name not in ("started", "clock")]


def test_a_draft_makes_what_the_dataclass_makes_field_for_field():
    given = _distinct()
    made = frozen(PlanDraft(*given))  # type: ignore[arg-type]
    plain = Plan(*given, started=made.started, clock=made.clock)  # type: ignore[arg-type]
    assert type(made) is Plan and made == plain
    names = [spec.name for spec in dataclasses.fields(Plan)]
    assert all(getattr(made, name) is value for name, value in zip(names, given))
    assert made.started > 0 and made.clock > 0


def test_a_draft_has_the_plans_defaults():
    required = [object() for spec in dataclasses.fields(Plan) if spec.default is dataclasses.MISSING
                and spec.default_factory is dataclasses.MISSING]
    made = frozen(PlanDraft(*required))  # type: ignore[arg-type]
    assert made == Plan(*required, started=made.started, clock=made.clock)  # type: ignore[arg-type]


def test_a_plan_is_frozen():
    made = frozen(PlanDraft(*_distinct()))  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.store = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del made.model  # type: ignore[misc]
