"""Write tools: the model proposes a change, the customer confirms it, the application runs it.

A write tool has, besides its arguments model, a check of its preconditions
against the current state (a failure is an ordinary tool error for the model),
a description of the change rendered by the application for the confirmation
card, and a handler that takes an idempotency key (the action id): a handler
run twice with one key changes the shop once. ``lookup`` asks the shop what
a run under a key did, without running anything: how an action whose
execution may have started (a process died after the shop's write, a press
given up as a dead letter) is settled.
"""

import asyncio
import logging
import re
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from tools.execution import (
    CallTimer,
    ToolExecutionResult,
    technical_error,
    timeout_error,
    validated_arguments,
)
from tools.registry import (
    Approval,
    Effect,
    HandlerRunner,
    PreparedAction,
    ToolKind,
    function_schema,
    validate_tool_name,
)
from tools.shop_backend import Customer
from turn import ToolBusinessError, ToolCall, TurnContext

logger = logging.getLogger(__name__)

ArgumentsT = TypeVar("ArgumentsT", bound=BaseModel)
StateT = TypeVar("StateT")


def N_(message: str) -> str:
    """Marks ``message`` for the catalogs (``scripts/i18n``); translated where shown."""
    return message


Localize = Callable[[str | None, str], str]
"""The customer's text ``message`` in ``language`` (the application's catalogs)."""


def as_written(language: str | None, message: str) -> str:
    """No catalogs: every text as written (Russian)."""
    return message


OUTCOME_UNKNOWN = "outcome_unknown"
"""A confirmed action whose call may have reached the shop without its answer reaching us."""

CARD_VALUE_MAX_CHARS = 200
_SPACES = re.compile(r"\s+")
# Control (Cc), format (Cf: bidi overrides and isolates, zero-width, BOM), separators of
# lines and paragraphs, unassigned and private-use characters, and pictographs (So): an
# address needs none of them, and each can make a value look like the card's own text.
_DROPPED = frozenset({"Cc", "Cf", "Cn", "Co", "Cs", "So"})
_QUOTES = str.maketrans({"«": '"', "»": '"'})


def card_value(value: str, *, max_chars: int = CARD_VALUE_MAX_CHARS) -> str:
    """A value the model (or the customer) wrote, made safe to show inside a card.

    Neutralised (no line breaks, no direction overrides or other invisible
    characters, no pictographs such as «✅», whitespace runs as one space, at most
    ``max_chars``) and set visibly apart in «guillemets», so a value cannot pass
    for the card's own words: ``«ул. Мира, 1 Заказ отменён»`` stays one quoted value.
    """
    return f"«{neutral_text(value, max_chars=max_chars)}»"


def neutral_text(value: str, *, max_chars: int) -> str:
    """``value`` on one line, without invisible characters or pictographs, at most ``max_chars``.

    What :func:`card_value` shows, without the quotes: for a text the application
    shows as someone else's words (a shop's message after its own outcome line).
    """
    kept = "".join(
        " " if char in "\n\r\t\v\f\u2028\u2029\x85" else char
        for char in unicodedata.normalize("NFC", value)
        if char in "\n\r\t\v\f\u2028\u2029\x85" or unicodedata.category(char) not in _DROPPED
    )
    text = _SPACES.sub(" ", kept).strip().translate(_QUOTES)
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return text


CARD_MAX_CHARS = 3000
"""A card's text at most (Telegram refuses a message over 4,096 characters)."""


def card_text(heading: str, fields: Sequence[tuple[str, str]]) -> str:
    """A card: the application's ``heading``, then one ``• label: value`` line per field.

    ``value`` is already neutralised (:func:`card_value`); a label (a shop's schema
    title or an argument's name) is neutralised here. Past :data:`CARD_MAX_CHARS`
    the card ends with «…»: what a card shows is cut, never what the press sends.
    """
    lines = [heading]
    lines += [f"• {neutral_text(label, max_chars=60)}: {value}" for label, value in fields]
    text = "\n".join(lines)
    if len(text) > CARD_MAX_CHARS:
        text = text[: CARD_MAX_CHARS - 1].rstrip() + "…"
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionResult:
    """What running a confirmed action did, in the application's words.

    ``card_text`` replaces the confirmation card («✅ Заказ 8042 отменён»);
    ``message`` tells the customer the result; ``error_code`` names the rule
    that refused it when ``done`` is false.
    """

    done: bool
    card_text: str
    message: str
    error_code: str | None = None
    # A confirmed read: the tool message the model answers from (the customer then reads
    # the model's answer; ``message`` is what they read if the model cannot answer).
    for_model: str | None = None

    @classmethod
    def unknown(cls) -> "ActionResult":
        """A run that may have reached the shop without its answer reaching us.

        The texts are the application's (its "being checked"), filled where the press
        is settled.
        """
        return cls(done=False, card_text="", message="", error_code=OUTCOME_UNKNOWN)

    @classmethod
    def failed(cls, error_code: str) -> "ActionResult":
        """A run that certainly changed nothing; the application's "could not" is filled in."""
        return cls(done=False, card_text="", message="", error_code=error_code)

    @classmethod
    def not_done(
        cls, error_code: str, card_text: str, message: str | None = None
    ) -> "ActionResult":
        """Nothing changed, for ``error_code``; the message is the card's text unless given."""
        return cls(
            done=False,
            card_text=card_text,
            message=card_text if message is None else message,
            error_code=error_code,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTool(Generic[ArgumentsT, StateT]):
    """A tool that changes the shop, only after the customer pressed «Подтвердить».

    ``check`` reads the current state for ``customer`` and raises
    :class:`~turn.ToolBusinessError` when the change is not allowed;
    ``describe`` renders the card's text from the arguments and that state;
    ``handler`` applies the change under an idempotency key; ``lookup`` answers
    the outcome of the change applied under a key (``None``: it was not);
    ``declined`` is the card's text when the customer said no (in their language).
    """

    kind: ClassVar[ToolKind] = "write"
    approval: ClassVar[Approval] = "card"
    effect: ClassVar[Effect] = "write"
    server: ClassVar[str | None] = None
    hands_off: ClassVar[bool] = False
    # The handler takes the action id as its idempotency key: a run again changes once.
    rerun_safe: ClassVar[bool] = True

    name: str
    description: str
    arguments_model: type[ArgumentsT]
    check: Callable[[ArgumentsT, Customer], Awaitable[StateT]]
    describe: Callable[[ArgumentsT, StateT], str]
    handler: Callable[[ArgumentsT, Customer, str], Awaitable[ActionResult]]
    lookup: Callable[[ArgumentsT, Customer, str], Awaitable[ActionResult | None]]
    declined: Callable[[ArgumentsT, Customer], str]
    timeout_seconds: float = 5.0

    def __post_init__(self) -> None:
        validate_tool_name(self.name)
        if not self.description.strip():
            raise ValueError(f"tool {self.name!r} needs a non-empty description")
        if self.arguments_model.model_config.get("extra") != "forbid":
            raise ValueError(f"arguments model of tool {self.name!r} must set extra='forbid'")

    def to_api_schema(self) -> dict[str, Any]:
        """The OpenAI function tool (``strict: true``) built from the arguments model."""
        return function_schema(self.arguments_model, self.name, self.description)

    async def execute(
        self, tool_call: ToolCall, context: TurnContext, runner: HandlerRunner
    ) -> ToolExecutionResult:
        """Never run at once: it needs the customer's yes."""
        raise TypeError(f"tool {self.name!r} needs the customer's approval")

    async def prepare(
        self, tool_call: ToolCall, context: TurnContext, timer: CallTimer
    ) -> PreparedAction:
        """Validate, check the preconditions within the deadline, render the card."""
        arguments = validated_arguments(self.arguments_model, self.name, tool_call, timer)
        deadline = asyncio.timeout(self.timeout_seconds)
        try:
            async with deadline:
                state = await self.check(arguments, Customer.of(context))
            description = self.describe(arguments, state)
        except ToolBusinessError:
            raise
        except Exception as error:
            # Only the deadline's own timeout is one; a TimeoutError the check raised is a crash.
            if isinstance(error, TimeoutError) and deadline.expired():
                raise timeout_error(self.name, self.timeout_seconds, timer) from error
            raise technical_error(self.name, timer) from error
        return PreparedAction(arguments=arguments.model_dump_json(), description=description)

    def decode(self, arguments: str) -> ArgumentsT:
        """The stored arguments through the arguments model (``ValueError`` if they fail)."""
        return self.arguments_model.model_validate_json(arguments)

    async def run(self, arguments: Any, customer: Customer, action_id: str) -> ActionResult:
        """Run the handler under the action's key within the deadline.

        A failure (the shop unreachable, or broken after applying the change) asks
        the shop by the key; only a shop that says "not applied" (or cannot be asked)
        makes it a failure.
        """
        deadline = asyncio.timeout(self.timeout_seconds)
        try:
            # A hung shop must not hold the chat's lease forever: the run has a deadline.
            async with deadline:
                return await self.handler(arguments, customer, action_id)
        except Exception:
            logger.exception("Action %s (%s) failed", action_id, self.name)
            done = await self.outcome_of(arguments, customer, action_id, marked=True)
            return done or ActionResult.failed("technical_error")

    async def outcome_of(
        self, arguments: Any, customer: Customer, action_id: str, *, marked: bool
    ) -> ActionResult | None:
        """What the shop applied under the action's key; ``None`` when nothing (or unreachable).

        Asked whether or not a mark is there: an action of an earlier version ran
        without one.
        """
        try:
            return await self.lookup(arguments, customer, action_id)
        except Exception:  # the shop's own failure: the caller's verdict stands
            logger.warning("Action %s (%s): the shop could not be asked", action_id, self.name)
            return None
