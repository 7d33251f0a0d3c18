"""The allowlist of tools the model may call."""

import copy
import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, NoReturn, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from turn import TurnContext

if TYPE_CHECKING:
    from tools.mcp.tool import McpTool
    from tools.write_tools import WriteTool

ArgumentsT = TypeVar("ArgumentsT", bound=BaseModel)
ResultT = TypeVar("ResultT", bound=BaseModel)

ToolHandler = (
    Callable[[ArgumentsT], ResultT | Awaitable[ResultT]]
    | Callable[[ArgumentsT, TurnContext], ResultT | Awaitable[ResultT]]
)

_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")

# Keywords OpenAI accepts in a strict function schema. Pydantic also emits
# constraints such as minLength or default; those stay enforced by our own
# validation of the arguments and are dropped from what the model sees.
_STRICT_SCHEMA_KEYWORDS = frozenset(
    {
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
)
_SCHEMA_MAPS = frozenset({"properties", "$defs"})


def _strip_unsupported(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_strip_unsupported(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    cleaned: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in _STRICT_SCHEMA_KEYWORDS:
            continue
        if key in _SCHEMA_MAPS:
            cleaned[key] = {name: _strip_unsupported(sub) for name, sub in value.items()}
        else:
            cleaned[key] = _strip_unsupported(value)
    return cleaned


def _read_only(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError("tool schemas are shared by every turn and cannot be changed")


class FrozenSchemaDict(dict[str, Any]):
    """A JSON object of a tool schema that refuses changes.

    A ``dict`` subclass so that any JSON encoder (the SDK's among them) writes it
    as it is; ``copy.deepcopy`` gives plain, changeable dicts and lists.
    """

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class FrozenSchemaList(list[Any]):
    """A JSON array of a tool schema that refuses changes (see :class:`FrozenSchemaDict`)."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = clear = extend = insert = pop = remove = reverse = sort = _read_only

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(value, memo) for value in self]

    def __reduce__(self) -> Any:
        return (list, (list(self),))


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return FrozenSchemaDict({key: _freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return FrozenSchemaList(_freeze(item) for item in value)
    return value


class ToolArguments(BaseModel):
    """The base of a tool's arguments model: a field the model invents is an error.

    The registry refuses an arguments model without ``extra='forbid'``.
    """

    model_config = ConfigDict(extra="forbid")


def text_argument(description: str, *, min_length: int, max_length: int) -> Any:
    """A free-text argument whose description ends by telling the model its length bounds.

    The strict schema drops ``minLength`` and ``maxLength``, so the bounds reach the
    model only in words, here taken from the same numbers the validation enforces.
    """
    return Field(
        min_length=min_length,
        max_length=max_length,
        description=f"{description} От {min_length} до {max_length} символов.",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultSummary:
    """What the audit may keep of a search-like result: how many items, and the first one's id.

    ``top_id`` must be an identifier the application controls (an article id, a
    SKU), never text the customer or the model wrote.
    """

    count: int
    top_id: str | None = None


ToolKind = Literal["read", "write", "mcp"]
"""A read tool looks things up and runs at once; a write tool changes the shop after a yes."""


@dataclass(frozen=True)
class RegisteredTool(Generic[ArgumentsT, ResultT]):
    """A tool the application allows: its contract, its handler and its time limit.

    The handler may be ``async def`` or a plain function, and may take a second
    parameter, the :class:`TurnContext`. A plain function runs in a worker thread
    unless ``blocking`` is false: a handler that only computes over memory is
    called on the event loop (a thread hop costs more than such a call). It cannot
    be interrupted there, so it must be quick; past its timeout its result is
    discarded as a timeout. ``blocking`` does not apply to ``async def`` handlers.
    """

    name: str
    description: str
    arguments_model: type[ArgumentsT]
    handler: ToolHandler[ArgumentsT, ResultT]
    timeout_seconds: float = 2.0
    blocking: bool = True
    # A closed category of a result (never text), kept in the execution's audit record.
    category: Callable[[ResultT], str] | None = None
    # How many items a search-like result holds and the first one's id, kept in the audit.
    result_summary: Callable[[ResultT], ResultSummary] | None = None
    # A successful call asks for a person: the step's outcome is a handoff, which the
    # chat service opens (the tool itself does no I/O).
    hands_off: bool = False
    takes_context: bool = field(init=False)
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        validate_tool_name(self.name)
        if not self.description.strip():
            raise ValueError(f"tool {self.name!r} needs a non-empty description")
        if not self.timeout_seconds > 0:
            raise ValueError(f"tool {self.name!r} needs a positive timeout")
        if self.arguments_model.model_config.get("extra") != "forbid":
            raise ValueError(f"arguments model of tool {self.name!r} must set extra='forbid'")
        parameters = list(inspect.signature(self.handler).parameters.values())
        if len(parameters) not in (1, 2):
            raise ValueError(
                f"handler of tool {self.name!r} must take (arguments) or (arguments, context)",
            )
        object.__setattr__(self, "takes_context", len(parameters) == 2)
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.handler))

    kind: ClassVar[ToolKind] = "read"

    def to_api_schema(self) -> dict[str, Any]:
        """The OpenAI function tool (``strict: true``) built from the arguments model."""
        return function_schema(self.arguments_model, self.name, self.description)


def validate_tool_name(name: str) -> None:
    """Refuse a name the API would not take (``ValueError``)."""
    if _NAME_PATTERN.fullmatch(name) is None:
        raise ValueError(f"tool name {name!r} must match {_NAME_PATTERN.pattern}")


def function_schema(
    arguments_model: type[BaseModel], name: str, description: str
) -> dict[str, Any]:
    """The OpenAI function tool (``strict: true``) for ``arguments_model``."""
    # Here, not at the top: the audit CLI reads tool records through this module
    # and should not pay for importing the SDK (about half a second).
    from openai import pydantic_function_tool  # noqa: PLC0415

    tool = pydantic_function_tool(arguments_model, name=name, description=description.strip())
    function = dict(tool["function"])
    parameters = _strip_unsupported(function.get("parameters", {}))
    # The model's docstring is for developers; the tool description speaks to the model.
    parameters.pop("description", None)
    function["parameters"] = parameters
    return {"type": "function", "function": function}


class ToolRegistryError(RuntimeError):
    """Base of the registry's errors."""


class DuplicateToolError(ToolRegistryError):
    """A tool with that name is registered already."""


class ToolNotRegisteredError(ToolRegistryError):
    """No tool with that name is registered."""


class ToolRegistry:
    """The tools the application allows, by name, in registration order."""

    def __init__(self) -> None:
        self._tools: dict[str, RegisteredTool[Any, Any]] = {}
        self._writes: dict[str, WriteTool[Any, Any]] = {}
        # A shop's MCP tools by server: replaced whole when a server lists its tools again.
        self._mcp: dict[str, dict[str, McpTool]] = {}
        self._builtin_schemas: list[dict[str, Any]] = []
        self._schemas: Sequence[dict[str, Any]] = FrozenSchemaList()

    def register_write(self, tool: "WriteTool[Any, Any]") -> None:
        """Add a write tool (the model proposes, the customer confirms); same names rule."""
        if tool.name in self._tools or tool.name in self._writes:
            raise DuplicateToolError(f"tool already registered: {tool.name}")
        self._writes[tool.name] = tool
        self._builtin_schemas.append(tool.to_api_schema())
        self._rebuild_schemas()

    def write_tool(self, name: str) -> "WriteTool[Any, Any] | None":
        """The write tool registered under ``name``, if ``name`` is one."""
        return self._writes.get(name)

    def register(self, tool: RegisteredTool[Any, Any]) -> None:
        """Add a tool; a second tool with the same name is refused."""
        if tool.name in self._tools or tool.name in self._writes:
            raise DuplicateToolError(f"tool already registered: {tool.name}")
        self._tools[tool.name] = tool
        self._builtin_schemas.append(tool.to_api_schema())
        self._rebuild_schemas()

    def set_mcp_tools(self, server: str, tools: Sequence["McpTool"]) -> tuple[str, ...]:
        """Offer exactly ``tools`` of MCP server ``server`` (replacing its earlier list).

        A tool whose name a built-in tool or another server's tool holds already is
        left out; the names left out are returned (for the start-up log line).
        """
        others = {name for other, listed in self._mcp.items() if other != server for name in listed}
        taken = {*self._tools, *self._writes, *others}
        kept = {tool.name: tool for tool in tools if tool.name not in taken}
        self._mcp[server] = kept
        self._rebuild_schemas()
        return tuple(tool.name for tool in tools if tool.name not in kept)

    def mcp_tool(self, name: str) -> "McpTool | None":
        """The MCP tool offered under ``name``, if ``name`` is one."""
        for listed in self._mcp.values():
            if name in listed:
                return listed[name]
        return None

    def _rebuild_schemas(self) -> None:
        # Schemas are built when tools change, not on every model request, and frozen, so
        # every turn can send the same objects without copying them.
        mcp = [tool.to_api_schema() for listed in self._mcp.values() for tool in listed.values()]
        self._schemas = _freeze([*self._builtin_schemas, *mcp])

    def get(self, name: str) -> RegisteredTool[Any, Any]:
        """The tool registered under ``name``."""
        try:
            return self._tools[name]
        except KeyError as error:
            raise ToolNotRegisteredError(f"tool not registered: {name!r}") from error

    def names(self) -> tuple[str, ...]:
        """Registered names (read tools, write tools, then MCP tools), in registration order."""
        return (*self._tools, *self._writes, *(n for listed in self._mcp.values() for n in listed))

    def api_schemas(self) -> Sequence[dict[str, Any]]:
        """The tools' API schemas in registration order: one shared, read-only list.

        Any attempt to change the list or a schema in it raises ``TypeError``;
        ``copy.deepcopy`` gives a changeable copy.
        """
        return self._schemas
