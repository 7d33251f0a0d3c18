"""The customer side of a trial: a script played as written, or a model playing a person.

The simulated customer is tau2-bench's user simulator in spirit: a chat model
is told the scenario's instructions, sees the bot's replies and cards (their
buttons as text) as the other side of the chat, and answers with a message,
``[confirm]``, ``[decline]`` or ``[done]``.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from bot.evaluation.scenario import CustomerSpec, ScriptStep
from bot.llm.types import Message, ToolCallingClient

MoveKind = Literal["say", "confirm", "decline", "done"]
Speaker = Literal["customer", "bot", "card", "press", "outcome", "note"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """What the customer does next."""

    kind: MoveKind
    text: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """One line of the conversation as the customer saw it."""

    speaker: Speaker
    text: str


class CustomerPlayer(Protocol):
    """Plays the customer of one trial."""

    async def next_move(self, transcript: Sequence[Line]) -> Move:
        """The next move, given the conversation so far."""
        ...


class ScriptedCustomer:
    """Plays ``script`` step by step, then is done."""

    def __init__(self, script: Sequence[ScriptStep]) -> None:
        self._steps = list(script)
        self._next = 0

    async def next_move(self, transcript: Sequence[Line]) -> Move:
        """The next scripted step (the transcript does not change the script)."""
        if self._next >= len(self._steps):
            return Move(kind="done")
        step = self._steps[self._next]
        self._next += 1
        if step.say is not None:
            return Move(kind="say", text=step.say)
        return Move(kind="confirm" if step.press == "confirm" else "decline")


SIMULATOR_INSTRUCTIONS = """\
You play a customer who writes to an online shop's support bot in Telegram. Stay in the \
role: you are the customer, never the support agent.

Your situation and goal:
{instructions}

Rules:
- Write one short message at a time, as a real customer would, in {language}.
- Say only what your situation says; if you are asked for something it does not give, \
say you do not know it. Do not make up order numbers, names or addresses.
- The bot may show a card with two buttons. To press its confirm button answer exactly \
[confirm]; to press its decline button answer exactly [decline]. Typing "yes" presses nothing.
- When your goal is reached, or clearly cannot be reached, answer exactly [done].
"""

OPENING = "(The chat is open. Write your first message to the support bot.)"
_CARD = "[A card with two buttons: confirm | decline]\n{text}"


class SimulatedCustomer:
    """A chat model playing the customer from the scenario's instructions."""

    def __init__(self, client: ToolCallingClient, spec: CustomerSpec, language: str | None) -> None:
        self._client = client
        self._instruction = SIMULATOR_INSTRUCTIONS.format(
            instructions=(spec.instructions or "").strip(),
            language=_language_name(language),
        )

    async def next_move(self, transcript: Sequence[Line]) -> Move:
        """Ask the model for the customer's next message or press."""
        result = await self._client.generate_with_tools(self.messages(transcript), ())
        return parse_move(result.text or "")

    def messages(self, transcript: Sequence[Line]) -> list[Message]:
        """The model's view: the bot speaks as ``user``, the customer as ``assistant``."""
        messages: list[Message] = [{"role": "system", "content": self._instruction}]
        bot_side: list[str] = [OPENING] if not transcript else []
        for line in transcript:
            if line.speaker in ("customer", "press"):
                if bot_side:
                    messages.append({"role": "user", "content": "\n\n".join(bot_side)})
                    bot_side = []
                text = line.text if line.speaker == "customer" else f"[{line.text}]"
                messages.append({"role": "assistant", "content": text})
            elif line.speaker == "card":
                bot_side.append(_CARD.format(text=line.text))
            else:
                bot_side.append(line.text)
        messages.append({"role": "user", "content": "\n\n".join(bot_side) or "(no answer)"})
        return messages


def parse_move(text: str) -> Move:
    """A move from the model's answer: a marker, or the message it wrote."""
    stripped = text.strip()
    lowered = stripped.lower()
    for marker, kind in (("[confirm]", "confirm"), ("[decline]", "decline")):
        if marker in lowered:
            return Move(kind=kind)  # type: ignore[arg-type]
    if "[done]" in lowered or not stripped:
        return Move(kind="done")
    return Move(kind="say", text=stripped)


def _language_name(code: str | None) -> str:
    names = {"ru": "Russian", "en": "English"}
    if code is None:
        return "the language of your situation's text"
    return names.get(code.split("-")[0], f"the language with code {code}")
