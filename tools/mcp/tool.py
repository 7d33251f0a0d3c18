"""A shop's MCP tool as this application registers it: schema, rules, card, result.

The connection to the server lives in ``bot.mcp`` (``tools`` never imports
``bot``): a tool calls its server through the :class:`McpCaller` it was built with.
"""

import json
import string
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from tools.mcp.schema import ArgumentsSchema
from tools.registry import ToolKind
from turn import ToolBusinessError, TurnContext

BoundSource = Literal["user_id", "chat_id", "shop_customer_id"]

ACCOUNT_NOT_LINKED = "account_not_linked"
TOOL_ERROR = "tool_error"


@dataclass(frozen=True, slots=True, kw_only=True)
class McpCallOutcome:
    """What a server answered to ``tools/call``: its error flag, structured content and text."""

    is_error: bool
    structured: Any
    text: str


class McpCallError(RuntimeError):
    """A call that got no answer; ``reached`` says whether the server may have run it.

    ``reached=False`` only when the request certainly never got to the server (no
    connection, connection refused): then the call may be sent again.
    """

    def __init__(self, message: str, *, reached: bool) -> None:
        super().__init__(message)
        self.reached = reached


McpCaller = Callable[[str, dict[str, Any], float, bool], Awaitable[McpCallOutcome]]
"""Calls a server's tool: its name on the server, the arguments, a deadline in seconds, and
whether sending it again after a lost connection is safe (a reconnect then retries once)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpTool:
    """One tool of a shop's MCP server, offered to the model under ``name``.

    ``confirm``: a call is a proposal the customer confirms with the card's button
    (every tool, unless the server is trusted and the tool says it only reads);
    ``idempotent``: trusted to be safe to run twice (a crash after the call does not
    leave its outcome unknown). ``bound`` maps the arguments the application fills
    to where their values come from.
    """

    kind: ClassVar[ToolKind] = "mcp"

    name: str
    server: str
    remote_name: str
    title: str
    description: str
    schema: ArgumentsSchema
    call: McpCaller = field(repr=False, compare=False)
    confirm: bool
    idempotent: bool = False
    timeout_seconds: float = 10.0
    bound: Mapping[str, BoundSource] = field(default_factory=dict)
    card_template: str | None = None
    result_max_chars: int = 8000
    labels: Mapping[str, str] = field(default_factory=dict)

    def to_api_schema(self) -> dict[str, Any]:
        """The OpenAI function tool: strict where the server's schema allows it."""
        function: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.schema.parameters,
        }
        if self.schema.strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def bind(self, arguments: Mapping[str, Any], context: TurnContext) -> dict[str, Any]:
        """``arguments`` with the bound ones filled from ``context``; a missing one is a "no"."""
        bound = dict(arguments)
        for name, source in self.bound.items():
            value = getattr(context, source)
            if value is None:
                raise ToolBusinessError(
                    "Клиент ещё не связал свой аккаунт магазина с этим чатом: попроси его "
                    "сначала поделиться номером телефона, потом повтори.",
                    code=ACCOUNT_NOT_LINKED,
                )
            bound[name] = value
        return bound

    def card_text(self, arguments: Mapping[str, Any]) -> str:
        """The confirmation card: the shop's template, or the title and the arguments listed."""
        shown = {key: value for key, value in arguments.items() if key not in self.bound}
        if self.card_template is not None:
            try:
                return _render(self.card_template, shown)
            except (KeyError, ValueError, IndexError, AttributeError):
                pass  # a template naming an argument the call left out: the plain list
        lines = [f"{self.title}?"]
        lines += [
            f"• {self.labels.get(key, key)}: {_readable(value)}" for key, value in shown.items()
        ]
        return "\n".join(lines)

    def outcome_texts(self, outcome: McpCallOutcome) -> tuple[str, str]:
        """The card's new text and the customer's message, rendered from the result."""
        said = _said(outcome, limit=600)
        if outcome.is_error:
            card = f"❌ {self.title}: не выполнено"
            return card, f"{card}. {said}".strip() if said else f"{card}."
        card = f"✅ {self.title}: выполнено"
        return card, f"{card}. {said}".strip() if said else f"{card}."


def tool_result_payload(outcome: McpCallOutcome, max_chars: int) -> dict[str, Any]:
    """The tool message's payload for a successful call, cut to ``max_chars``.

    The structured content when the server sent it, else the text; a payload
    longer than ``max_chars`` becomes its first ``max_chars`` characters with a
    ``truncated`` flag, so one huge answer never fills the model's context.
    """
    data: Any = outcome.structured if outcome.structured is not None else {"text": outcome.text}
    payload = {"ok": True, "data": data}
    encoded = json.dumps(payload, ensure_ascii=False)
    if len(encoded) <= max_chars:
        return payload
    text = outcome.text if outcome.structured is None else json.dumps(data, ensure_ascii=False)
    return {
        "ok": True,
        "data": {"text": text[: max_chars // 2], "truncated": True, "total_chars": len(text)},
    }


def business_error(outcome: McpCallOutcome, max_chars: int) -> ToolBusinessError:
    """A result with ``isError``: the tool's "no", its text (cut) for the model."""
    text = outcome.text.strip() or "Инструмент магазина ответил ошибкой."
    return ToolBusinessError(text[: max(200, max_chars // 4)], code=TOOL_ERROR)


def _said(outcome: McpCallOutcome, *, limit: int) -> str:
    """What the result says to a customer: its ``message`` (or ``error.message``) when the
    structured content has one, else its text unless that is only the content's JSON."""
    structured = outcome.structured if isinstance(outcome.structured, dict) else {}
    error = structured.get("error")
    message = structured.get("message")
    if not isinstance(message, str) and isinstance(error, dict):
        message = error.get("message")
    if isinstance(message, str) and message.strip():
        text = " ".join(message.split())
    elif outcome.text.strip() and not _json_only(outcome.text):
        text = " ".join(outcome.text.split())
    else:
        text = ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_only(text: str) -> bool:
    """Whether ``text`` is a JSON object or array (a server's copy of its structured content)."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        json.loads(stripped)
    except ValueError:
        return False
    return True


def _readable(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "да" if value else "нет"
    if isinstance(value, list):
        return ", ".join(_readable(item) for item in value)
    return json.dumps(value, ensure_ascii=False)


class _Template(string.Formatter):
    """``str.format`` over the arguments, without attribute or index access (no surprises)."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        if not field_name.isidentifier():
            raise ValueError(field_name)
        return (_readable(kwargs[field_name]), field_name)


def _render(template: str, arguments: Mapping[str, Any]) -> str:
    return _Template().vformat(template, (), dict(arguments))
