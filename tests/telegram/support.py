"""Telegram test helpers: settings without any ``.env``, a recording chat stub, the runner."""

import asyncio
from dataclasses import dataclass, field
from typing import Any

from bot.chat_service import ChatReply
from bot.settings import (
    Settings,
)
from bot.telegram.runner import run_bot
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.telegram_server import TEST_TOKEN, FakeTelegramServer
from tools.context import ToolContext


def make_settings(**env: Any) -> Settings:
    """Settings from ``env`` (variable names as in ``.env``) and defaults; no ``.env`` read."""
    values: dict[str, Any] = {
        "TELEGRAM_BOT_TOKEN": TEST_TOKEN,
        "LLM_BACKEND": "offline",
        "TELEGRAM_SHUTDOWN_GRACE_SECONDS": 10,
        # Polling mode's health server on any free port: tests run side by side.
        "HEALTH_PORT": 0,
    }
    values.update(env)
    return Settings.from_env(values, env_file=None)


def stack_settings(
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    redis_url: str,
    *,
    prefix: str,
    **env: Any,
) -> Settings:
    """The bot's settings against a test's three servers; keys and the audit under ``prefix``."""
    return make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        LLM_BACKEND="openai",
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=model.base_url,
        LLM_MODEL="scripted-model",
        LLM_MAX_RETRIES=0,
        LLM_TIMEOUT_SECONDS=5,
        REDIS_URL=redis_url,
        REDIS_KEY_PREFIX=prefix,
        AUDIT_STREAM=f"{prefix}:audit",
        REDIS_SOCKET_TIMEOUT_SECONDS=1,
        **env,
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


class PollingBot:
    """The real runner (``run_bot`` in polling mode) as a task of this test's event loop.

    ``start()`` returns once the bot polls the fake Bot API; ``stop()`` is what
    SIGTERM does (graceful: turns in flight finish) and returns the exit code.
    """

    def __init__(self, settings: Settings, telegram: FakeTelegramServer) -> None:
        self._settings = settings
        self._telegram = telegram
        self._task: asyncio.Task[int] | None = None
        self._stop = asyncio.Event()

    async def start(self, within: float = 15.0) -> None:
        """Start the runner and wait (bounded) until its first ``getUpdates``."""
        polls_before = self._telegram.received("getUpdates")
        self._stop = asyncio.Event()
        task = asyncio.create_task(run_bot(self._settings, "polling", self._stop))
        self._task = task
        await self._telegram.wait_for(
            lambda: self._telegram.received("getUpdates") > polls_before or task.done(), within
        )
        assert not task.done(), "the bot stopped during start-up"

    async def stop(self, within: float = 20.0) -> int:
        """Stop gracefully (idempotent); returns the runner's exit code."""
        if self._task is None:
            return 0
        self._stop.set()
        async with asyncio.timeout(within):
            code = await self._task
        self._task = None
        return code


def user_texts(body: dict[str, Any]) -> list[str]:
    """The user messages a chat-completions request showed the model, oldest first."""
    return [str(m["content"]) for m in body["messages"] if m["role"] == "user"]
