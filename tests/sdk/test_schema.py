"""Tool schemas derived from signatures, type hints and docstrings (gateway/sdk/schema.py)
and their strict form (the tools built from them: test_tools.py)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from gateway.sdk import ToolDefinitionError, tool
from gateway.sdk.schema import derive, nulls_to_defaults, strict_schema


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Address(BaseModel):
    """Where."""

    street: str
    number: int | None = None


@dataclasses.dataclass
class Window:
    start: int
    end: int = 10


def weather(city: str, unit: Unit = Unit.CELSIUS, days: int = 1) -> str:
    """Get the weather forecast.

    Longer text about the forecast.

    Args:
        city: The city to look up.
        unit: Which scale.
    """
    return city


def test_types_defaults_and_google_docstring():
    schema = derive(weather, strict=False)
    assert schema.name == "weather"
    assert schema.description == "Get the weather forecast.\n\nLonger text about the forecast."
    assert schema.strict is False
    assert schema.parameters == {
        "type": "object", "additionalProperties": False, "required": ["city"],
        "properties": {
            "city": {"type": "string", "description": "The city to look up."},
            "unit": {"enum": ["celsius", "fahrenheit"], "type": "string", "default": "celsius",
                     "description": "Which scale."},
            "days": {"type": "integer", "default": 1},
        }}


def test_numpy_and_rest_docstrings():
    def numpy(q: str) -> str:
        """Search.

        Parameters
        ----------
        q : str
            What to search for.
        """

    def rest(q: str) -> str:
        """Search.

        :param q: What to search for.
        """

    for fn in (numpy, rest):
        assert derive(fn).parameters["properties"]["q"]["description"] == "What to search for."


def test_nested_models_dataclasses_literals_optionals_constraints():
    def book(where: Address, window: Window, kind: Literal["a", "b"], note: Optional[str] = None,
             count: Annotated[int, Field(ge=1, le=5, description="How many.")] = 1,
             tags: list[str] = []) -> None:
        """Book."""

    params = derive(book, strict=False).parameters
    props = params["properties"]
    assert "$defs" not in params  # inlined: every property is in plain sight
    assert props["where"]["type"] == "object" and props["where"]["description"] == "Where."
    assert props["where"]["required"] == ["street"]
    assert props["where"]["properties"]["number"] == {"anyOf": [{"type": "integer"}, {"type": "null"}],
                                                      "default": None}
    assert props["where"]["properties"]["street"] == {"type": "string"}
    assert props["window"]["properties"] == {"start": {"type": "integer"},
                                             "end": {"type": "integer", "default": 10}}
    assert props["kind"] == {"enum": ["a", "b"], "type": "string"}
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props["count"] == {"type": "integer", "minimum": 1, "maximum": 5, "default": 1,
                              "description": "How many."}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "default": []}
    assert params["required"] == ["where", "window", "kind"]


def test_strict_form_requires_everything_and_nulls_stand_for_defaults():
    schema = derive(weather)  # strict when possible: it is
    assert schema.strict is True
    params = schema.parameters
    assert params["required"] == ["city", "unit", "days"] and params["additionalProperties"] is False
    assert params["properties"]["days"] == {"anyOf": [{"type": "integer"}, {"type": "null"}],
                                            "description": "Default: 1."}
    assert params["properties"]["unit"]["description"] == 'Which scale. Default: "celsius".'
    # The model's nulls for the defaulted parameters validate to the defaults.
    values = schema.arguments.validate('{"city": "Paris", "unit": null, "days": null}', strict=True)
    assert (values.city, values.unit, values.days) == ("Paris", Unit.CELSIUS, 1)


def test_strict_nested_objects_and_a_null_that_is_a_value():
    def f(where: Address, note: Optional[str] = "keep") -> None:
        """F."""

    schema = derive(f, strict=True)
    nested = schema.parameters["properties"]["where"]
    assert nested["required"] == ["street", "number"] and nested["additionalProperties"] is False
    # `note` admits None: a null is kept as the value, not replaced by the default.
    values = schema.arguments.validate({"where": {"street": "Main", "number": None}, "note": None}, strict=True)
    assert values.note is None and values.where.number is None


def test_nulls_to_defaults_walks_references_and_arrays():
    schema = {"$defs": {"N": {"type": "object", "properties": {"x": {"type": "integer"},
                                                                 "kids": {"type": "array", "items": {"$ref": "#/$defs/N"}}},
                              "required": []}},
              "$ref": "#/$defs/N"}
    assert nulls_to_defaults({"x": None, "kids": [{"x": None, "kids": []}]}, schema) == {"kids": [{"kids": []}]}


class Node(BaseModel):
    name: str
    children: list[Node] = []


def test_recursive_models_keep_their_defs():
    def walk(tree: Node) -> str:
        """Walk."""

    params = derive(walk, strict=True).parameters
    assert params["properties"]["tree"] == {"$ref": "#/$defs/Node"}
    assert params["$defs"]["Node"]["required"] == ["name", "children"]


def test_what_strict_mode_cannot_express_falls_back_or_fails():
    def mapping(scores: dict[str, int]) -> None:
        """M."""

    def anything(value: Any) -> None:
        """A."""

    for fn in (mapping, anything):
        assert derive(fn).strict is False
        with pytest.raises(ToolDefinitionError, match="strict mode impossible.*strict=False"):
            tool(fn, strict=True)
    with pytest.raises(ToolDefinitionError):
        strict_schema({"type": "object", "additionalProperties": {"type": "integer"}})


def test_titles_are_dropped_but_a_parameter_named_title_is_kept():
    def note(title: str, body: str) -> None:
        """Note."""

    params = derive(note).parameters
    assert list(params["properties"]) == ["title", "body"]
    assert "title" not in params and "title" not in params["properties"]["title"]


def test_arguments_are_checked_and_bound():
    def div(a: float, b: float, /, *, exact: bool = False) -> float:
        """Divide."""
        return a / b

    made = tool(div)
    values = made.schema.arguments.validate('{"a": 1, "b": "2", "exact": true}', strict=True)
    assert made.call_sync(values) == 0.5
    for bad, message in (('{"a": 1}', "b: Field required"), ("[1]", "must be a JSON object"),
                         ("{nope", "not valid JSON"), ('{"a": 1, "b": 2, "c": 3}', "c: Extra inputs")):
        with pytest.raises(ValueError, match=message):
            made.schema.arguments.validate(bad, strict=True)


def test_a_field_description_wins_over_the_docstring():
    def f(x: Annotated[int, Field(description="From Annotated")], y: int = Field(3, description="From the default"),
          z: int = Field(4)) -> None:
        """F.

        Args:
            x: from the docstring
            y: from the docstring
            z: From the docstring
        """

    schema = derive(f)
    props = schema.parameters["properties"]
    assert props["x"]["description"] == "From Annotated"
    assert props["y"]["description"] == "From the default. Default: 3."
    assert props["z"]["description"] == "From the docstring. Default: 4."
    values = schema.arguments.validate({"x": 1, "y": None, "z": None}, strict=True)
    assert (values.x, values.y, values.z) == (1, 3, 4)
