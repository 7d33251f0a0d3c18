"""RegisteredTool refuses bad definitions; schemas fit OpenAI strict mode; the registry's API."""

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from tools.registry import (
    DuplicateToolError,
    RegisteredTool,
    ToolNotRegisteredError,
    ToolRegistry,
)
from turn import TurnContext

# Keywords OpenAI's strict mode accepts (structured outputs guide, "Supported schemas").
STRICT_KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
    "const",
    "description",
    "title",
    "$ref",
    "$defs",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
}


class EchoArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str


class EchoResult(BaseModel):
    text: str


class LooseArguments(BaseModel):
    text: str


def echo(arguments: EchoArguments) -> EchoResult:
    return EchoResult(text=arguments.text)


def make_tool(**overrides: Any) -> RegisteredTool[Any, Any]:
    fields: dict[str, Any] = {
        "name": "echo",
        "description": "Повторяет текст.",
        "arguments_model": EchoArguments,
        "handler": echo,
    }
    fields.update(overrides)
    return RegisteredTool(**fields)


@pytest.mark.parametrize("name", ["", "Echo", "1echo", "echo-tool", "echo tool", "e" * 65])
def test_tool_name_must_match_the_pattern(name: str) -> None:
    with pytest.raises(ValueError, match="must match"):
        make_tool(name=name)


@pytest.mark.parametrize("description", ["", "   \n"])
def test_tool_needs_a_non_empty_description(description: str) -> None:
    with pytest.raises(ValueError, match="description"):
        make_tool(description=description)


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_tool_needs_a_positive_timeout(timeout: float) -> None:
    with pytest.raises(ValueError, match="positive timeout"):
        make_tool(timeout_seconds=timeout)


def test_arguments_model_must_forbid_extra_fields() -> None:
    with pytest.raises(ValueError, match="extra='forbid'"):
        make_tool(arguments_model=LooseArguments)


def test_handler_must_take_one_or_two_parameters() -> None:
    def no_parameters() -> EchoResult:
        return EchoResult(text="")

    def three_parameters(a: EchoArguments, b: TurnContext, c: int) -> EchoResult:
        return EchoResult(text="")

    for handler in (no_parameters, three_parameters):
        with pytest.raises(ValueError, match="handler"):
            make_tool(handler=handler)


def test_handler_shape_is_detected_at_registration() -> None:
    async def with_context(arguments: EchoArguments, context: TurnContext) -> EchoResult:
        return EchoResult(text=arguments.text)

    plain = make_tool()
    contextual = make_tool(handler=with_context)
    assert (plain.takes_context, plain.is_async) == (False, False)
    assert (contextual.takes_context, contextual.is_async) == (True, True)


def _walk_schema(schema: Any, path: str, problems: list[str]) -> None:
    """Collect every strict-mode violation below ``schema``."""
    if not isinstance(schema, dict):
        return
    for keyword in schema:
        if keyword not in STRICT_KEYWORDS:
            problems.append(f"{path}: unsupported keyword {keyword!r}")
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            problems.append(f"{path}: additionalProperties is not false")
        properties = schema.get("properties", {})
        if sorted(schema.get("required", [])) != sorted(properties):
            problems.append(f"{path}: required {schema.get('required')} != {sorted(properties)}")
        for name, sub in properties.items():
            _walk_schema(sub, f"{path}.properties.{name}", problems)
    for name, sub in schema.get("$defs", {}).items():
        _walk_schema(sub, f"{path}.$defs.{name}", problems)
    if "items" in schema:
        _walk_schema(schema["items"], f"{path}.items", problems)
    for index, sub in enumerate(schema.get("anyOf", [])):
        _walk_schema(sub, f"{path}.anyOf[{index}]", problems)


def test_every_default_tool_schema_is_valid_for_strict_mode(
    default_registry: ToolRegistry,
) -> None:
    schemas = default_registry.api_schemas()
    assert [schema["function"]["name"] for schema in schemas] == list(default_registry.names())
    problems: list[str] = []
    for schema in schemas:
        function = schema["function"]
        assert schema["type"] == "function"
        assert function["strict"] is True
        assert function["description"].strip()
        assert function["parameters"]["type"] == "object"
        _walk_schema(function["parameters"], function["name"], problems)
    assert problems == []


def test_schema_drops_constraints_strict_mode_does_not_accept() -> None:
    """Pydantic's minLength/maxLength/default would make a strict request fail."""

    class Constrained(BaseModel):
        model_config = ConfigDict(extra="forbid")

        query: str = "кофе"
        limit: int = 3

    tool = make_tool(arguments_model=Constrained)
    parameters = tool.to_api_schema()["function"]["parameters"]
    problems: list[str] = []
    _walk_schema(parameters, "constrained", problems)
    assert problems == []
    assert sorted(parameters["required"]) == ["limit", "query"]


def test_registry_registers_and_gets_tools_by_name() -> None:
    registry = ToolRegistry()
    tool = make_tool()
    registry.register(tool)
    assert registry.get("echo") is tool
    assert registry.names() == ("echo",)


def test_registry_refuses_a_duplicate_name() -> None:
    registry = ToolRegistry()
    registry.register(make_tool())
    with pytest.raises(DuplicateToolError):
        registry.register(make_tool(description="Другая версия."))
    assert registry.names() == ("echo",)


def test_registry_get_of_an_unknown_name_raises() -> None:
    with pytest.raises(ToolNotRegisteredError, match="delete_order"):
        ToolRegistry().get("delete_order")


def test_api_schemas_is_one_read_only_list_in_registration_order() -> None:
    registry = ToolRegistry()
    for name in ("zeta", "alpha", "mid"):
        registry.register(make_tool(name=name))
    first = registry.api_schemas()
    assert [schema["function"]["name"] for schema in first] == ["zeta", "alpha", "mid"]
    assert registry.names() == ("zeta", "alpha", "mid")
    assert registry.api_schemas() is first  # built once, not per turn
    pristine = json.dumps(first)

    schema = first[0]
    function = schema["function"]
    properties = function["parameters"]["properties"]
    attempts: list[Callable[[], object]] = [
        first.clear,  # type: ignore[attr-defined]
        lambda: first.append({}),  # type: ignore[attr-defined]
        lambda: first.__setitem__(0, {}),  # type: ignore[index]
        lambda: function.__setitem__("name", "mutated"),
        lambda: function.update(name="mutated"),
        lambda: function.pop("name"),
        properties.clear,
        lambda: function["parameters"]["required"].append("extra"),
        lambda: schema.setdefault("strict", False),
    ]
    for attempt in attempts:
        with pytest.raises(TypeError, match="cannot be changed"):
            attempt()

    assert json.dumps(registry.api_schemas()) == pristine


def test_a_deep_copy_of_the_api_schemas_is_plain_and_changeable() -> None:
    registry = ToolRegistry()
    registry.register(make_tool(name="echo"))

    copied: Any = copy.deepcopy(registry.api_schemas())
    copied[0]["function"]["name"] = "mutated"
    copied.append({})

    assert type(copied) is list
    assert type(copied[0]["function"]) is dict
    assert registry.api_schemas()[0]["function"]["name"] == "echo"
    assert len(registry.api_schemas()) == 1
