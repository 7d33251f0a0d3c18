"""The allowlist of tools the model may call."""

import asyncio
import copy
import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Literal,
    NoReturn,
    Protocol,
    TypeVar,
    cast,
)

from pydantic import BaseModel, ConfigDict, Field

from turn import ToolCall, TurnContext

if TYPE_CHECKING:
    from tools.execution import CallTimer, ToolExecutionResult
    from tools.mcp.tool import McpTool
    from tools.shop_backend import Customer
    from tools.write_tools import ActionResult, WriteTool

ArgumentsT = TypeVar("ArgumentsT", bound=BaseModel)
ResultT = TypeVar("ResultT", bound=BaseModel)

ToolHandler = (
    Callable[[ArgumentsT], ResultT | Awaitable[ResultT]]
    | Callable[[ArgumentsT, TurnContext], ResultT | Awaitable[ResultT]]
)

_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")

# What OpenAI's strict mode accepts in a function schema: the one list, read by the
# built-in tools (pydantic's schema is cut to it) and by a shop's MCP tools
# (tools/mcp/schema.py, which states its exceptions against it). Pydantic also emits
# constraints such as minLength or default; those stay enforced by our own validation
# of the arguments and are dropped from what the model sees.
STRICT_SCHEMA_KEYWORDS = frozenset(
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
STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
"""The string formats strict mode accepts; any other ``format`` is checked by us alone."""
_STRICT_SCHEMA_KEYWORDS = STRICT_SCHEMA_KEYWORDS
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
        elif key == "format" and value not in STRICT_FORMATS:
            continue  # a format strict mode refuses: our validation still checks it
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
"""Kept for code written against round 4; the registry no longer asks it (see :class:`Tool`)."""

Approval = Literal["none", "card"]
"""Whether a call runs at once (``none``) or becomes a card the customer confirms (``card``)."""

Effect = Literal["read", "write"]
"""What a run's result is for: ``read``, it goes back to the model, which answers;
``write``, its outcome is told by the application, from the result, in the
customer's language."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedAction:
    """A call that needs the customer's approval, checked and ready for its card.

    ``arguments``: the validated arguments as JSON (what the press sends, bound ones
    filled); ``description``: the card's text, rendered by the application in the
    customer's language, every value neutralised.
    """

    arguments: str
    description: str


class Tool(Protocol):
    """One tool, whatever its source (a module of ``tools/``, the help center, a shop's server).

    Every tool says its name, description and argument schema (checked by its
    validator before anything runs), its ``approval`` and ``effect``, and how to run
    it. A tool with ``approval == "none"`` runs through :meth:`execute`; one with
    ``approval == "card"`` is proposed through :meth:`prepare` and, after the
    customer's yes, run through :meth:`run` (at most once: a run that may have
    started is settled by :meth:`outcome_of`, never by running it again unless
    :attr:`rerun_safe`). The registry is the only place that knows how a tool is
    built; everything else speaks to this protocol.
    """

    @property
    def name(self) -> str:
        """The name the model calls it by."""

    @property
    def description(self) -> str:
        """What the model reads about it."""

    @property
    def approval(self) -> Approval:
        """``card``: the customer confirms each call on a card before it runs."""

    @property
    def effect(self) -> Effect:
        """``read``: the result goes back to the model; ``write``: the application tells it."""

    @property
    def server(self) -> str | None:
        """The shop's MCP server it comes from (``None``: the application's own)."""

    @property
    def hands_off(self) -> bool:
        """A successful call asks for a person (the chat service opens the handoff)."""

    @property
    def rerun_safe(self) -> bool:
        """A confirmed run may be sent again after a crash (an idempotency key, a trusted hint)."""

    @property
    def timeout_seconds(self) -> float:
        """The deadline of one run (and of a proposal's checks)."""

    def to_api_schema(self) -> dict[str, Any]:
        """The OpenAI function tool the model is offered."""

    async def execute(
        self, tool_call: ToolCall, context: TurnContext, runner: "HandlerRunner"
    ) -> "ToolExecutionResult":
        """Run a call that needs no approval (validation, deadline, audit record)."""

    async def prepare(
        self, tool_call: ToolCall, context: TurnContext, timer: "CallTimer"
    ) -> PreparedAction:
        """Check a call that needs approval and render its card; nothing changes yet.

        Raises the executor's errors (invalid arguments, timeout, crash) and
        :class:`~turn.ToolBusinessError` for a rule that refuses it.
        """

    def decode(self, arguments: str) -> Any:
        """The stored arguments of a proposal, as :meth:`run` takes them (``ValueError``)."""

    def declined(self, arguments: Any, customer: "Customer") -> str:
        """The card's text when the customer said no, in their language."""

    async def run(self, arguments: Any, customer: "Customer", action_id: str) -> "ActionResult":
        """Run a confirmed call once, within its deadline; the outcome in the customer's words.

        Never raises: a run whose outcome cannot be known is
        :meth:`~tools.write_tools.ActionResult.unknown`.
        """

    async def outcome_of(
        self, arguments: Any, customer: "Customer", action_id: str, *, marked: bool
    ) -> "ActionResult | None":
        """What a run of ``action_id`` did, asked after a crash, an expiry or a given-up press.

        ``marked``: the action's executing mark is there (a run may have started).
        ``None``: nothing was applied.
        """


class HandlerRunner(Protocol):
    """Runs an application tool's handler (the executor, with its thread pool)."""

    async def run_registered(
        self, tool: "RegisteredTool[Any, Any]", tool_call: ToolCall, context: TurnContext
    ) -> "ToolExecutionResult":
        """Validate ``tool_call`` and run ``tool``'s handler within its deadline."""


def _no_approval(name: str) -> NoReturn:
    raise TypeError(f"tool {name!r} runs without approval: it has no card")


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
    approval: ClassVar[Approval] = "none"
    effect: ClassVar[Effect] = "read"
    server: ClassVar[str | None] = None
    rerun_safe: ClassVar[bool] = True

    def to_api_schema(self) -> dict[str, Any]:
        """The OpenAI function tool (``strict: true``) built from the arguments model."""
        return function_schema(self.arguments_model, self.name, self.description)

    async def execute(
        self, tool_call: ToolCall, context: TurnContext, runner: HandlerRunner
    ) -> "ToolExecutionResult":
        """Validate, run the handler through ``runner``, make the audit record."""
        return await runner.run_registered(self, tool_call, context)

    async def prepare(
        self, tool_call: ToolCall, context: TurnContext, timer: "CallTimer"
    ) -> PreparedAction:
        """Not proposed: it runs at once."""
        _no_approval(self.name)

    def decode(self, arguments: str) -> Any:
        """Not proposed: it runs at once."""
        _no_approval(self.name)

    def declined(self, arguments: Any, customer: "Customer") -> str:
        """Not proposed: it runs at once."""
        _no_approval(self.name)

    async def run(self, arguments: Any, customer: "Customer", action_id: str) -> "ActionResult":
        """Not proposed: it runs at once."""
        _no_approval(self.name)

    async def outcome_of(
        self, arguments: Any, customer: "Customer", action_id: str, *, marked: bool
    ) -> "ActionResult | None":
        """Not proposed: it runs at once."""
        _no_approval(self.name)


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


def _built_as(tool: Tool | None, kind: ToolKind) -> bool:
    return tool is not None and getattr(tool, "kind", None) == kind


class ToolRegistry:
    """The tools the application allows, by name, in registration order: one kind of value.

    The application's own tools are registered once; a shop's MCP server's tools
    are replaced whole each time the server lists them (:meth:`set_mcp_tools`).
    Names held by the application (:meth:`reserve`) are never given to a server.
    """

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._reserved: set[str] = set()
        self._schemas: Sequence[dict[str, Any]] = FrozenSchemaList()
        self._changed = asyncio.Event()

    def register(self, tool: Tool) -> None:
        """Add an application tool; a second tool with the same name is refused."""
        if tool.name in self._tools:
            raise DuplicateToolError(f"tool already registered: {tool.name}")
        self._tools[tool.name] = tool
        self._rebuild_schemas()

    def register_write(self, tool: Tool) -> None:
        """Add a tool that needs the customer's approval (the same as :meth:`register`)."""
        self.register(tool)

    def reserve(self, *names: str) -> None:
        """Keep ``names`` for the application even while it offers no tool under them.

        ``request_human_agent`` without a staff chat: a shop's tool of that name would
        otherwise take the built-in's name.
        """
        self._reserved.update(names)

    def set_mcp_tools(self, server: str, tools: Sequence[Tool]) -> tuple[str, ...]:
        """Offer exactly ``tools`` of MCP server ``server`` (replacing its earlier list).

        A tool whose name an application tool, a reserved name, another server's tool
        or an earlier tool of the same list holds already is left out; the names left
        out are returned (for the start-up warning).
        """
        kept = {name: tool for name, tool in self._tools.items() if tool.server != server}
        left_out: list[str] = []
        for tool in tools:
            if tool.name in kept or tool.name in self._reserved:
                left_out.append(tool.name)
                continue
            kept[tool.name] = tool
        self._tools = kept
        self._rebuild_schemas()
        return tuple(left_out)

    def find(self, name: str) -> Tool | None:
        """The tool offered under ``name`` now (``None``: none is)."""
        return self._tools.get(name)

    async def listed(self, name: str, within_seconds: float) -> Tool | None:
        """The tool under ``name``, waiting up to ``within_seconds`` for a server to list it."""
        try:
            async with asyncio.timeout(within_seconds):
                while (tool := self._tools.get(name)) is None:
                    await self._changed.wait()
                return tool
        except TimeoutError:
            return None

    def write_tool(self, name: str) -> "WriteTool[Any, Any] | None":
        """The application's write tool under ``name``, as built (for tests and benchmarks)."""
        tool = self._tools.get(name)
        # The builders' own mark (the classes build on this module, so no isinstance here).
        return cast("WriteTool[Any, Any]", tool) if _built_as(tool, "write") else None

    def mcp_tool(self, name: str) -> "McpTool | None":
        """The shop's MCP tool under ``name``, as built (for tests and benchmarks)."""
        tool = self._tools.get(name)
        return cast("McpTool", tool) if _built_as(tool, "mcp") else None

    def _rebuild_schemas(self) -> None:
        # Schemas are built when tools change, not on every model request, and frozen, so
        # every turn can send the same objects without copying them. The application's
        # tools first, then the servers', as the model has always seen them.
        ordered = sorted(self._tools.values(), key=lambda tool: tool.server is not None)
        self._tools = {tool.name: tool for tool in ordered}
        self._schemas = _freeze([tool.to_api_schema() for tool in ordered])
        # Wake the presses waiting for a server's tool, then arm the next wait.
        self._changed.set()
        self._changed = asyncio.Event()

    def get(self, name: str) -> RegisteredTool[Any, Any]:
        """The seed's lookup: the application tool without approval under ``name``, as built.

        Code that runs tools uses :meth:`find` (any tool); this one is for code that
        needs a :class:`RegisteredTool`'s handler (benchmarks, tests).
        """
        tool = self._tools.get(name)
        if not isinstance(tool, RegisteredTool):
            raise ToolNotRegisteredError(f"tool not registered: {name!r}")
        return tool

    def names(self) -> tuple[str, ...]:
        """Offered names (the application's tools, then the servers'), in registration order."""
        return tuple(self._tools)

    def api_schemas(self) -> Sequence[dict[str, Any]]:
        """The tools' API schemas in registration order: one shared, read-only list.

        Any attempt to change the list or a schema in it raises ``TypeError``;
        ``copy.deepcopy`` gives a changeable copy.
        """
        return self._schemas
