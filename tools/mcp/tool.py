"""A shop's MCP tool as this application registers it: schema, rules, card, result.

The connection to the server lives in ``bot.mcp`` (``tools`` never imports
``bot``): a tool calls its server through the :class:`McpCaller` it was built with.
"""

import asyncio
import functools
import json
import logging
import string
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from tools.execution import (
    CallTimer,
    ToolArgumentsError,
    ToolExecutionResult,
    business_error_content,
    technical_error,
    timeout_error,
    tool_content,
)
from tools.mcp.schema import ArgumentsInvalid, ArgumentsSchema
from tools.registry import Approval, Effect, HandlerRunner, PreparedAction, ToolKind
from tools.shop_backend import Customer
from tools.write_tools import (
    N_,
    ActionResult,
    Localize,
    as_written,
    card_text,
    card_value,
    neutral_text,
)
from turn import ToolBusinessError, ToolCall, ToolStatus, TurnContext

logger = logging.getLogger(__name__)

BoundSource = Literal["user_id", "chat_id", "shop_customer_id"]

ACCOUNT_NOT_LINKED = "account_not_linked"
TOOL_ERROR = "tool_error"
UNREADABLE_RESULT = "unreadable_result"
UNREADABLE_MESSAGE = (
    "Ответ инструмента магазина не удалось прочитать. Скажи клиенту, что эти данные сейчас "
    "недоступны, и не выдумывай их."
)


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
    ``unreadable``: the server answered, but its answer could not be read.
    """

    def __init__(self, message: str, *, reached: bool, unreadable: bool = False) -> None:
        super().__init__(message)
        self.reached = reached
        self.unreadable = unreadable


McpCaller = Callable[[str, dict[str, Any], float, bool], Awaitable[McpCallOutcome]]
"""Calls a server's tool: its name on the server, the arguments, a deadline in seconds, and
whether sending it again after a lost connection is safe (a reconnect then retries once)."""


# The customer's texts of a shop's tool: the shop names the tool (its title), the
# application says everything else, in the customer's language.
CARD_HEADING = N_("{title}?")
DONE_TEXT = N_("✅ {title}: выполнено")
NOT_DONE_TEXT = N_("❌ {title}: не выполнено")
NOT_DONE_MESSAGE = N_(
    "❌ {title}: магазин не выполнил действие, ничего не изменено. Если нужно, напишите мне."
)
DECLINED_TEXT = N_("{title}: вы отказались, ничего не сделано")
YES = N_("да")
NO = N_("нет")
SAID_MAX_CHARS = 500
"""How much of what a shop's result says to the customer is shown after the outcome."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpTool:
    """One tool of a shop's MCP server, offered to the model under ``name``: a :class:`Tool`.

    ``needs_card``: a call is a proposal the customer confirms with the card's button
    (every tool, unless the server is trusted and the tool says it only reads);
    ``idempotent``: trusted to be safe to run twice (a crash after the call does not
    leave its outcome unknown). ``bound`` maps the arguments the application fills
    (the ones this tool declares) to where their values come from; ``read_only``:
    the tool says it only reads (its result is for the model).
    """

    kind: ClassVar[ToolKind] = "mcp"
    hands_off: ClassVar[bool] = False

    name: str
    server: str
    remote_name: str
    title: str
    description: str
    schema: ArgumentsSchema
    call: McpCaller = field(repr=False, compare=False)
    needs_card: bool
    idempotent: bool = False
    read_only: bool = False
    timeout_seconds: float = 10.0
    bound: Mapping[str, BoundSource] = field(default_factory=dict)
    card_template: str | None = None
    result_max_chars: int = 8000
    labels: Mapping[str, str] = field(default_factory=dict)
    localize: Localize = field(default=as_written, repr=False, compare=False)

    @property
    def approval(self) -> Approval:
        """``card`` unless a trusted server says the tool only reads."""
        return "card" if self.needs_card else "none"

    @property
    def effect(self) -> Effect:
        """``read`` when the tool says it only reads, else ``write``."""
        return "read" if self.read_only else "write"

    @property
    def rerun_safe(self) -> bool:
        """Only a tool a trusted server calls idempotent is sent again after a crash."""
        return self.idempotent

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

    def checked(self, tool_call: ToolCall, timer: CallTimer) -> dict[str, Any]:
        """The model's arguments checked against the server's schema (bound names refused)."""
        try:
            return self.schema.validate(tool_call.arguments)
        except ArgumentsInvalid as error:
            raise ToolArgumentsError(
                f"arguments of {self.name} failed validation",
                timer.record(ToolStatus.REJECTED, "invalid_arguments"),
                problems=tuple(error.problems),
            ) from error

    async def execute(
        self, tool_call: ToolCall, context: TurnContext, runner: HandlerRunner
    ) -> ToolExecutionResult:
        """Run a call that needs no button: validate, bind, call within its deadline.

        The deadline is ours (``asyncio.timeout``) around the whole call, reconnect and
        retry included; ``isError`` is the tool's "no", fed back like a business error.
        """
        timer = CallTimer(tool_call, server=self.server)
        arguments = self.checked(tool_call, timer)
        try:
            bound = self.bind(arguments, context)
        except ToolBusinessError as error:
            return ToolExecutionResult(
                content=business_error_content(error),
                audit=timer.record(ToolStatus.BUSINESS_ERROR, error.code),
            )
        deadline = asyncio.timeout(self.timeout_seconds)
        try:
            async with deadline:
                # A tool without a button only reads (trusted readOnlyHint): safe to send again.
                outcome = await self.call(self.remote_name, bound, self.timeout_seconds, True)
        except TimeoutError as error:
            if deadline.expired():
                raise timeout_error(self.name, self.timeout_seconds, timer) from error
            raise technical_error(self.name, timer) from error
        except McpCallError as error:
            if error.unreadable:
                # One unreadable answer of a read is the tool's failure, not the turn's:
                # the model hears it and answers without it.
                logger.warning("Tool %s: %s", self.name, error)
                return ToolExecutionResult(
                    content=business_error_content(
                        ToolBusinessError(UNREADABLE_MESSAGE, code=UNREADABLE_RESULT)
                    ),
                    audit=timer.record(ToolStatus.TECHNICAL_ERROR, UNREADABLE_RESULT),
                )
            raise technical_error(self.name, timer) from error
        if outcome.is_error:
            refusal = business_error(outcome, self.result_max_chars)
            return ToolExecutionResult(
                content=business_error_content(refusal),
                audit=timer.record(ToolStatus.BUSINESS_ERROR, refusal.code),
            )
        return ToolExecutionResult(
            content=tool_content(tool_result_payload(outcome, self.result_max_chars)),
            audit=timer.record(ToolStatus.SUCCESS, None),
        )

    async def prepare(
        self, tool_call: ToolCall, context: TurnContext, timer: CallTimer
    ) -> PreparedAction:
        """Check the arguments, fill the bound ones, render the card; nothing is called."""
        bound = self.bind(self.checked(tool_call, timer), context)
        return PreparedAction(
            arguments=json.dumps(bound, ensure_ascii=False),
            description=self.card_text(bound, context.language),
        )

    def decode(self, arguments: str) -> dict[str, Any]:
        """The stored arguments (a JSON object), as sent to the server."""
        decoded = json.loads(arguments)
        if not isinstance(decoded, dict):
            raise ValueError("the stored arguments are not a JSON object")
        return decoded

    def declined(self, arguments: Any, customer: Customer) -> str:
        """The card's text after a no, in the customer's language."""
        return self._tr(customer.language, DECLINED_TEXT).format(title=self.title)

    async def run(self, arguments: Any, customer: Customer, action_id: str) -> ActionResult:
        """Call the server once within the deadline; an answer that never came is unknown."""
        deadline = asyncio.timeout(self.timeout_seconds)
        try:
            async with deadline:
                outcome = await self.call(
                    self.remote_name, arguments, self.timeout_seconds, self.idempotent
                )
        except McpCallError as error:
            logger.warning("Action %s (%s): %s", action_id, self.name, error)
            if not error.reached:
                return ActionResult.failed("technical_error")
            return ActionResult.unknown()
        except Exception:
            # A timeout or a failure after the request left: the shop may have done it.
            logger.exception("Action %s (%s) got no answer", action_id, self.name)
            return ActionResult.unknown()
        card_text, message = self.outcome_texts(outcome, customer.language)
        if outcome.is_error:
            return ActionResult.not_done(TOOL_ERROR, card_text, message)
        # A read's result is for the model, which answers the customer from it.
        for_model = (
            tool_content(tool_result_payload(outcome, self.result_max_chars))
            if self.effect == "read"
            else None
        )
        return ActionResult(done=True, card_text=card_text, message=message, for_model=for_model)

    async def outcome_of(
        self, arguments: Any, customer: Customer, action_id: str, *, marked: bool
    ) -> ActionResult | None:
        """A server cannot be asked what a call did: a marked call's outcome is unknown."""
        return ActionResult.unknown() if marked else None

    def _tr(self, language: str | None, message: str) -> str:
        return self.localize(language, message)

    def card_text(self, arguments: Mapping[str, Any], language: str | None = None) -> str:
        """The confirmation card: the shop's template or the title, and every argument sent.

        Values are neutralised (:func:`~tools.write_tools.card_value`); a template
        that names some arguments is followed by the others, listed, so the card
        never hides what the press sends.
        """
        tr = functools.partial(self._tr, language)
        shown = {key: value for key, value in arguments.items() if key not in self.bound}
        values = {key: _shown(value, tr) for key, value in shown.items()}
        heading: str | None = None
        named: set[str] = set()
        if self.card_template is not None:
            try:
                heading, named = _render(self.card_template, values)
            except (KeyError, ValueError, IndexError, AttributeError):
                heading = None  # a template naming an argument the call left out: the list
        if heading is None:
            heading, named = tr(CARD_HEADING).format(title=self.title), set()
        fields = [
            (self.labels.get(key, key), value) for key, value in values.items() if key not in named
        ]
        return card_text(heading, fields)

    def outcome_texts(
        self, outcome: McpCallOutcome, language: str | None = None
    ) -> tuple[str, str]:
        """The card's new text and the customer's message, in the customer's language.

        A refusal (``isError``) is told in the application's words only; a success
        adds what the result says to a person (its ``message``), neutralised.
        """
        tr = functools.partial(self._tr, language)
        if outcome.is_error:
            card = tr(NOT_DONE_TEXT).format(title=self.title)
            return card, tr(NOT_DONE_MESSAGE).format(title=self.title)
        card = tr(DONE_TEXT).format(title=self.title)
        said = _said(outcome, language, limit=SAID_MAX_CHARS)
        return card, f"{card}. {said}" if said else f"{card}."


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


def _said(outcome: McpCallOutcome, language: str | None, *, limit: int) -> str:
    """What the result says to a customer: its ``message`` when the structured content has
    one (a string, or the texts by language code), else its text unless that is only the
    content's JSON; neutralised as a card's value is, without the quotes."""
    structured = outcome.structured if isinstance(outcome.structured, dict) else {}
    message = structured.get("message")
    if isinstance(message, dict):
        message = message.get(language or "") or None
    if isinstance(message, str) and message.strip():
        text = message
    elif outcome.text.strip() and not _json_only(outcome.text):
        text = outcome.text
    else:
        return ""
    return neutral_text(text, max_chars=limit)


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


def _shown(value: Any, tr: Callable[[str], str]) -> str:
    """A value on a card: a yes/no in the customer's words, a number as is, text quoted."""
    if isinstance(value, bool):
        return tr(YES) if value else tr(NO)
    if isinstance(value, int | float):
        return json.dumps(value)
    return card_value(_readable(value, tr))


def _readable(value: Any, tr: Callable[[str], str]) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return tr(YES) if value else tr(NO)
    if isinstance(value, list):
        return ", ".join(_readable(item, tr) for item in value)
    return json.dumps(value, ensure_ascii=False)


class _Template(string.Formatter):
    """``str.format`` over the arguments, without attribute or index access (no surprises)."""

    def __init__(self) -> None:
        super().__init__()
        self.named: set[str] = set()

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        if not field_name.isidentifier():
            raise ValueError(field_name)
        self.named.add(field_name)
        return (kwargs[field_name], field_name)


def _render(template: str, values: Mapping[str, str]) -> tuple[str, set[str]]:
    """The template filled with the neutralised values, and the arguments it names."""
    formatter = _Template()
    return formatter.vformat(template, (), dict(values)), formatter.named
