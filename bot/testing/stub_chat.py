"""A chat service stand-in for front-end tests: echoes, or raises what it is told."""

import asyncio
from dataclasses import dataclass, field

from bot.chat_service import ChatReply
from tools.context import ToolContext


def chat_reply(text: str, turn_id: str) -> ChatReply:
    """A ``ChatReply`` with only the text that matters here."""
    return ChatReply(
        text=text,
        turn_id=turn_id,
        session_id="s",
        history_messages=2,
        context_history_messages=0,
        removed_history_messages=0,
        estimated_prompt_tokens=10,
        model="stub",
        prompt_id="support_chat",
        prompt_version="1.2.0",
        elapsed_seconds=0.0,
        prompt_tokens=None,
        completion_tokens=None,
        total_tokens=None,
        response_id="r",
        response_ids=("r",),
        model_steps=1,
        tool_calls_count=0,
        tool_names=(),
        summary_updated=False,
        has_summary=False,
    )


@dataclass
class StubChat:
    """A chat service stand-in for handler unit tests: echoes, or raises what it is told.

    The engine itself is exercised end to end in ``test_e2e_polling``; here the point
    is what the handlers do with a reply or a failure.
    """

    failure: BaseException | None = None
    asked: list[tuple[str, str, ToolContext]] = field(default_factory=list)
    resets: list[str] = field(default_factory=list)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)

    async def reply(self, conversation_key: str, text: str, context: ToolContext) -> ChatReply:
        self.asked.append((conversation_key, text, context))
        gate = self.gates.get(text)
        if gate is not None:
            await gate.wait()
        if self.failure is not None:
            raise self.failure
        return chat_reply(f"Ответ на: {text}", context.turn_id)

    async def reset(self, conversation_key: str) -> None:
        if self.failure is not None:
            raise self.failure
        self.resets.append(conversation_key)
