"""A function's JSON schema, derived with pydantic from its signature, type hints and
docstring, and the strict form of it.

Each parameter becomes a field of a pydantic model made for the function
(`create_model`, `extra="forbid"`): its type hint is the field's type (nested models,
dataclasses, enums, `Literal`, `Optional`, `Annotated[..., Field(...)]` constraints all
work as they do in pydantic), its default the field's default, its description the one
the docstring gives it (Google, NumPy or reST style, read by `docstring_parser`). The
same model validates the model's arguments before the function runs, so the schema the
model is shown and the check its arguments pass are one definition.

References to nested models are inlined (small models and servers that do not follow
`$ref` then see every property); a recursive model keeps its `$defs`. Pydantic's
generated `title`s are dropped: they repeat the names.

Strict mode (`strict: true` on the tool) lets the server constrain the model's output
to the schema, and only accepts a subset of JSON Schema: every object lists all its
properties in `required` and has `additionalProperties: false`. `strict_schema` makes
that form: a parameter with a default becomes required and nullable (`anyOf` with
`{"type": "null"}`), its default moves into its description ("Default: ..."), and
`ArgumentsModel.validate` turns the `null` the model then sends for it back into "use
the default" (unless the parameter's own type admits `None`, where `null` is a value).
A schema strict mode cannot express (a `dict[str, X]` mapping, an untyped `Any`) raises
`StrictSchemaError`.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Callable

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from .errors import ToolDefinitionError

# OpenAI's rule for function names (the gateway and Llama Stack accept the same).
NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_ONE = ("items", "not", "additionalProperties")


class StrictSchemaError(ToolDefinitionError):
    """The schema uses something strict mode cannot express."""


@dataclass(frozen=True, slots=True)
class FunctionSchema:
    """What a function looks like to a model, and how to check and call it."""

    name: str
    description: str | None
    parameters: dict[str, Any]  # the JSON schema the model is shown (strict or not)
    strict: bool
    arguments: "ArgumentsModel"


class ArgumentsModel:
    """The pydantic model of a function's parameters: validates arguments and turns
    them into the call."""

    def __init__(self, model: type[BaseModel], positional: tuple[str, ...],
                 loose_schema: dict[str, Any]) -> None:
        self.model = model
        self.positional = positional
        self.loose_schema = loose_schema  # before the strict transformation

    def validate(self, arguments: str | dict[str, Any], strict: bool) -> BaseModel:
        """The arguments as the model's instance; raises ValueError with a message the
        model can act on."""
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                raise ValueError(f"arguments are not valid JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise ValueError("arguments must be a JSON object")
        if strict:
            arguments = nulls_to_defaults(arguments, self.loose_schema)
        try:
            return self.model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                                 for e in exc.errors(include_url=False))
            raise ValueError(f"invalid arguments: {problems}") from None

    def call_args(self, values: BaseModel) -> tuple[list[Any], dict[str, Any]]:
        """Positional-only parameters by position, the others by name; nested models
        stay model instances, as the function's type hints say."""
        names = type(values).model_fields
        args = [getattr(values, name) for name in self.positional]
        kwargs = {name: getattr(values, name) for name in names if name not in self.positional}
        return args, kwargs


def derive(fn: Callable[..., Any], *, name: str | None = None, description: str | None = None,
           strict: bool | None = None) -> FunctionSchema:
    """The schema of `fn`. strict: True requires the strict form (StrictSchemaError if
    impossible), False never makes it, None makes it when the schema allows."""
    name = name or str(getattr(fn, "__name__", ""))
    if not NAME_RE.fullmatch(name):
        raise ToolDefinitionError(
            f"tool name {name!r} must be 1-64 letters, digits, '_' or '-'; give one with tool(fn, name=...)")
    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ToolDefinitionError(f"tool {name!r}: cannot read its signature: {exc}") from None
    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    described = {param.arg_name: param.description for param in doc.params if param.description}
    fields: dict[str, Any] = {}
    positional = []
    for param in signature.parameters.values():
        where = f"tool {name!r}, parameter {param.name!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"{where}: *args and **kwargs cannot be described to a model")
        if param.name not in hints:
            raise ToolDefinitionError(f"{where}: needs a type hint (the model is shown its type)")
        if param.name.startswith("_"):
            raise ToolDefinitionError(f"{where}: a name starting with '_' cannot be an argument")
        if param.kind is param.POSITIONAL_ONLY:
            positional.append(param.name)
        fields[param.name] = _field(hints[param.name], param.default, param.empty,
                                    described.get(param.name))
    try:
        model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        loose = tidy(model.model_json_schema())
    except Exception as exc:  # pydantic's own errors name the type it could not handle
        raise ToolDefinitionError(f"tool {name!r}: its parameters have no JSON schema: {exc}") from None
    if description is None:
        parts = [doc.short_description, doc.long_description]
        description = "\n\n".join(p for p in parts if p) or None
    parameters, is_strict = loose, False
    if strict is not False:
        try:
            parameters, is_strict = strict_schema(loose), True
        except StrictSchemaError as exc:
            if strict:
                raise StrictSchemaError(f"tool {name!r}: strict mode impossible: {exc}; "
                                        "use tool(fn, strict=False)") from None
    return FunctionSchema(name, description, parameters, is_strict,
                          ArgumentsModel(model, tuple(positional), loose))


def _field(annotation: Any, default: Any, empty: Any, text: str | None) -> tuple[Any, Any]:
    """A parameter as a pydantic field; a description given with `Field(...)` (as the
    default or in `Annotated`) wins over the docstring's."""
    if isinstance(default, FieldInfo):
        if text and not default.description:
            default = FieldInfo.merge_field_infos(default, description=text)
        return annotation, default
    default = ... if default is empty else default
    own = any(isinstance(meta, FieldInfo) and meta.description
              for meta in typing.get_args(annotation)[1:]) if typing.get_origin(annotation) is Annotated else False
    return annotation, Field(default, description=text) if text and not own else default


def tidy(schema: dict[str, Any]) -> dict[str, Any]:
    """Titles dropped, `$ref`s inlined unless a model refers to itself."""
    schema = _drop_titles(schema)
    defs = schema.get("$defs")
    if defs and not _recursive(defs):
        schema = _inline(schema, defs)
        schema.pop("$defs", None)
    return schema


def _drop_titles(node: Any, in_properties: bool = False) -> Any:
    if isinstance(node, list):
        return [_drop_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    # Under `properties` and `$defs` the keys are names, not keywords: a parameter may
    # be called "title".
    if in_properties:
        return {key: _drop_titles(value) for key, value in node.items()}
    return {key: _drop_titles(value, key in ("properties", "$defs"))
            for key, value in node.items() if key != "title"}


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"].rsplit("/", 1)[-1]} if isinstance(node.get("$ref"), str) else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(_refs(item) for item in node)) if node else set()
    return set()


def _recursive(defs: dict[str, Any]) -> bool:
    edges = {name: _refs(body) for name, body in defs.items()}

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for nxt in edges.get(start, ()):
            if nxt == target or (nxt not in seen and reaches(nxt, target, seen | {nxt})):
                return True
        return False

    return any(reaches(name, name, set()) for name in defs)


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if isinstance(node.get("$ref"), str):
        target = _inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        siblings = {k: _inline(v, defs) for k, v in node.items() if k != "$ref"}
        return {**target, **siblings}  # a field's description wins over the model's
    return {key: _inline(value, defs) for key, value in node.items()}


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The strict form (see the module docstring); raises StrictSchemaError."""
    return _strict(copy.deepcopy(schema), "(arguments)")


def _strict(node: dict[str, Any], path: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise StrictSchemaError(f"{path}: not a schema")
    if "default" in node:
        default = node.pop("default")
        if default is not None:  # null needs no note: it is what the model sends
            note = f"Default: {json.dumps(default)}."
            text = str(node.get("description") or "").rstrip()
            node["description"] = f"{text}{'' if text.endswith(('.', '!', '?')) else '.'} {note}" if text else note
    if not node or set(node) <= {"description"}:
        raise StrictSchemaError(f"{path}: has no type (Any)")
    if node.get("type") == "object" or "properties" in node:
        extra = node.get("additionalProperties")
        if extra not in (None, False) or "properties" not in node and "$ref" not in node:
            raise StrictSchemaError(f"{path}: a mapping with free keys (dict) cannot be strict")
        required = set(node.get("required", ()))
        properties = node.get("properties", {})
        for key, sub in list(properties.items()):
            sub = _strict(sub, f"{path}.{key}" if path != "(arguments)" else key)
            properties[key] = sub if key in required or allows_null(sub) else _nullable(sub)
        node["required"] = list(properties)
        node["additionalProperties"] = False
    for key in _SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            node[key] = [_strict(sub, path) for sub in node[key]]
    for key in ("items", "not"):
        if isinstance(node.get(key), dict):
            node[key] = _strict(node[key], f"{path}[]")
    if isinstance(node.get("$defs"), dict):
        node["$defs"] = {name: _strict(body, name) for name, body in node["$defs"].items()}
    return node


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    description = node.pop("description", None)
    wrapped: dict[str, Any] = {"anyOf": [node, {"type": "null"}]}
    if description:
        wrapped["description"] = description
    return wrapped


def allows_null(node: Any) -> bool:
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if not (set(node) - {"description", "default"}):  # Any
        return True
    return any(allows_null(sub) for key in ("anyOf", "oneOf") for sub in node.get(key) or ())


def nulls_to_defaults(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Drop the `null`s strict mode made the model send for parameters it may omit,
    where `null` is not a value of the parameter's own type, at every depth."""
    defs = schema.get("$defs") or {}

    def resolve(node: Any) -> Any:
        seen = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str) and seen < 64:
            node, seen = defs.get(node["$ref"].rsplit("/", 1)[-1], {}), seen + 1
        return node

    def walk(value: Any, node: Any) -> Any:
        node = resolve(node)
        if not isinstance(node, dict):
            return value
        if isinstance(value, dict) and isinstance(node.get("properties"), dict):
            required = set(node.get("required", ()))
            out = {}
            for key, item in value.items():
                sub = resolve(node["properties"].get(key))
                if item is None and key not in required and not allows_null(sub):
                    continue
                out[key] = walk(item, sub)
            return out
        if isinstance(value, list) and isinstance(node.get("items"), dict):
            return [walk(item, node["items"]) for item in value]
        return value

    walked: dict[str, Any] = walk(arguments, schema)
    return walked
