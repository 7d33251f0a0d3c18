"""Helpers of the Telegram tests: settings without any ``.env``, a recording chat stub."""

import asyncio
from dataclasses import dataclass, field
from typing import Any

from bot.chat_service import ChatReply
from bot.settings import (
    AuditSettings,
    FloodSettings,
    LLMSettings,
    PromptSettings,
    RedisSettings,
    SessionSettings,
    Settings,
    TelegramSettings,
    ToolSettings,
    WebhookSettings,
)
from tests.fakes.telegram_server import TEST_TOKEN
from tools.context import ToolContext


def make_settings(**env: Any) -> Settings:
    """Settings from ``env`` (variable names as in ``.env``) and defaults; no ``.env`` read."""
    values: dict[str, Any] = {
        "TELEGRAM_BOT_TOKEN": TEST_TOKEN,
        "LLM_BACKEND": "offline",
        "TELEGRAM_SHUTDOWN_GRACE_SECONDS": 10,
    }
    values.update(env)
    sections: dict[str, Any] = {
        "telegram": TelegramSettings,
        "webhook": WebhookSettings,
        "llm": LLMSettings,
        "redis": RedisSettings,
        "session": SessionSettings,
        "tools": ToolSettings,
        "audit": AuditSettings,
        "flood": FloodSettings,
        "prompts": PromptSettings,
    }
    return Settings(
        **{name: cls(_env_file=None, **values) for name, cls in sections.items()},
        log_level="INFO",
    )


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
