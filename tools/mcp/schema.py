"""An MCP tool's JSON Schema as the model sees it, and the validation of the model's arguments.

The model gets a strict function schema where the server's schema allows one
(every object closed with ``additionalProperties: false``, every property
required, the optional ones nullable) and the server's own schema, not strict,
where it does not (a free-form map, ``$ref``, ``format``, combinators...). The
arguments are always validated against the server's schema (by ``jsonschema``)
before a call; the rules strict mode drops (``minLength``, say) are checked there.
"""

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from jsonschema import FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.validators import validator_for

from tools.registry import STRICT_FORMATS, STRICT_SCHEMA_KEYWORDS

# What a strict function schema may hold: the one list of tools/registry.py, with
# the MCP exceptions stated against it. ``$ref``/``$defs`` are structural (this module
# does not resolve a server's references), so they make the tool non-strict; a
# ``format`` strict mode does not know (``uri``, say) too, where the built-in tools only
# drop it from what the model sees (their own validation checks it either way).
_MCP_NOT_KEPT = frozenset({"$ref", "$defs", "format"})
_STRICT_KEPT = STRICT_SCHEMA_KEYWORDS - _MCP_NOT_KEPT
_NOT_STRICT = frozenset(
    {
        "$ref",
        "$defs",
        "definitions",
        "oneOf",
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "patternProperties",
        "propertyNames",
        "prefixItems",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
        "$dynamicRef",
    }
)


_COMPOSED = frozenset({"allOf", "anyOf", "oneOf", "$ref"})

_FORMATS = FormatChecker()


@_FORMATS.checks("uri")
def _is_uri(value: object) -> bool:
    """An absolute URI (jsonschema checks ``uri`` only with an optional package installed)."""
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(parts.scheme) and bool(parts.netloc or parts.path) and " " not in value


class McpSchemaError(ValueError):
    """A server's input schema that cannot be used (not an object schema, not valid)."""


class _NotStrict(Exception):
    """The schema needs the non-strict fallback."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgumentsSchema:
    """The schema the model sees for one tool, and the validator of its arguments.

    ``parameters`` is the function's ``parameters`` object; ``strict`` says
    whether it is a strict schema (then the model writes ``null`` for an
    optional field it leaves out, which :meth:`validate` removes first).
    """

    parameters: dict[str, Any]
    strict: bool
    server_schema: dict[str, Any]
    bound: frozenset[str]

    @classmethod
    def build(cls, input_schema: Mapping[str, Any], bound: Iterable[str] = ()) -> "ArgumentsSchema":
        """Translate a server's ``inputSchema``; ``bound`` arguments are removed from it."""
        bound_names = frozenset(bound)
        schema = copy.deepcopy(dict(input_schema))
        if schema.get("type", "object") != "object":
            raise McpSchemaError("the input schema is not an object schema")
        schema["type"] = "object"
        properties = dict(schema.get("properties") or {})
        for name in bound_names:
            properties.pop(name, None)
        schema["properties"] = properties
        schema["required"] = [
            name for name in schema.get("required", []) if name not in bound_names
        ]
        # A field the model invents is an error, as for the built-in tools; not where the
        # properties are composed (top-level allOf...): closing the empty top level would
        # refuse every property the composition declares.
        if not _COMPOSED.intersection(schema):
            schema.setdefault("additionalProperties", False)
        try:
            validator_for(schema).check_schema(schema)
        except SchemaError as error:
            raise McpSchemaError(f"the input schema is not valid: {error.message}") from error
        try:
            parameters = _strict(schema, root=True)
            strict = True
        except _NotStrict:
            parameters = copy.deepcopy(schema)
            strict = False
        return cls(parameters=parameters, strict=strict, server_schema=schema, bound=bound_names)

    def validate(self, arguments_json: str | None) -> dict[str, Any]:
        """The model's arguments checked against the server's schema; :class:`ArgumentsInvalid`."""
        try:
            arguments = json.loads(arguments_json or "{}")
        except json.JSONDecodeError as error:
            raise ArgumentsInvalid(["arguments: not valid JSON; send one JSON object"]) from error
        if not isinstance(arguments, dict):
            raise ArgumentsInvalid(["arguments: send one JSON object"])
        supplied = sorted(self.bound.intersection(arguments))
        if supplied:
            raise ArgumentsInvalid(
                [
                    f"{name}: filled by the application from the customer's identity; leave it out"
                    for name in supplied
                ]
            )
        if self.strict:
            arguments = _drop_nulls(arguments, self.server_schema)
        validator_class = validator_for(self.server_schema)
        validator = validator_class(self.server_schema, format_checker=_FORMATS)
        problems = [_describe(error) for error in validator.iter_errors(arguments)]
        if problems:
            raise ArgumentsInvalid(sorted(problems))
        return dict(arguments)


class ArgumentsInvalid(ValueError):
    """The model's arguments fail the tool's schema; ``problems`` names fields and rules only."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _strict(schema: Any, *, root: bool = False) -> dict[str, Any]:
    """A strict copy of ``schema`` or :class:`_NotStrict`.

    An absent ``additionalProperties`` is closed (what a tool's arguments mean); an
    explicit one, or a nested object without ``properties``, is a free-form map.
    """
    if not isinstance(schema, dict):
        raise _NotStrict
    if _NOT_STRICT.intersection(schema):
        raise _NotStrict
    if "format" in schema and schema["format"] not in STRICT_FORMATS:
        raise _NotStrict
    kind = schema.get("type")
    result = {key: value for key, value in schema.items() if key in _STRICT_KEPT}
    if "format" in schema:
        result["format"] = schema["format"]
    if kind == "object" or "properties" in schema:
        if schema.get("additionalProperties", False) is not False:
            raise _NotStrict  # a free-form map: strict mode cannot say it
        if "properties" not in schema and not root:
            raise _NotStrict
        properties = schema.get("properties") or {}
        required = set(schema.get("required", []))
        result["type"] = "object"
        result["properties"] = {
            name: _strict(sub) if name in required else _nullable(_strict(sub))
            for name, sub in properties.items()
        }
        result["required"] = list(properties)
        result["additionalProperties"] = False
    elif "items" in schema:
        result["items"] = _strict(schema["items"])
    if "anyOf" in schema:
        result["anyOf"] = [_strict(sub) for sub in schema["anyOf"]]
    return result


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also takes ``null`` (how strict mode says "optional")."""
    kind = schema.get("type")
    if "enum" in schema:
        schema = {**schema, "enum": [*schema["enum"], None]}
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list):
        return {**schema, "type": [*kind, "null"]} if "null" not in kind else schema
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _drop_nulls(value: Any, schema: Any) -> Any:
    """Remove the ``null`` the model wrote for optional fields (walking the server's schema)."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        required = set(schema.get("required", []))
        properties = schema["properties"]
        return {
            key: _drop_nulls(item, properties.get(key))
            for key, item in value.items()
            if not (item is None and key not in required)
        }
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_drop_nulls(item, schema["items"]) for item in value]
    return value


def _describe(error: ValidationError) -> str:
    """One failed rule, naming the field and the rule, never the model's value."""
    field = ".".join(str(part) for part in error.absolute_path) or "arguments"
    rule = str(error.validator)
    if rule in ("required", "additionalProperties"):
        # These name property names (the schema's words or the model's keys), no values.
        return f"{field}: {error.message}"
    expected = error.validator_value
    if isinstance(expected, dict | list) and rule not in ("enum", "type"):
        return f"{field}: fails the rule {rule}"
    return f"{field}: must satisfy {rule} {json.dumps(expected, ensure_ascii=False)}"
