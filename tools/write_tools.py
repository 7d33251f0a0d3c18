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

import re
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from tools.registry import ToolKind, function_schema, validate_tool_name
from tools.shop_backend import Customer

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
    kept = "".join(
        " " if char in "\n\r\t\v\f\u2028\u2029\x85" else char
        for char in unicodedata.normalize("NFC", value)
        if char in "\n\r\t\v\f\u2028\u2029\x85" or unicodedata.category(char) not in _DROPPED
    )
    text = _SPACES.sub(" ", kept).strip().translate(_QUOTES)
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return f"«{text}»"


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
