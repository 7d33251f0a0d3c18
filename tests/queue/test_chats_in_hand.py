"""How many chats one process holds at once (real redis-server).

A chat in hand mostly waits for the model, so a process that stops taking chats
while it still has model connections to spare leaves a burst to its busier
neighbour: with 512 in hand, a worker process (whose loop does no intake) filled
its slots first and the rest of a 1,000-customer burst fell to the poller
(bench/README.md, "Fifth round"). A chat past the model's connections only
queues for one, so a process takes as many as ``LLM_MAX_CONNECTIONS`` unless
``WORKER_CONCURRENCY`` says otherwise.
"""

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from aiogram import Bot

from bot.llm.types import LLMResult, Message, TextListener, ToolChoice, ToolDefinition
from bot.settings import MAX_WORKER_CONCURRENCY, RedisSettings
from bot.storage.connection import async_client
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from tests.queue.echo_pool import echo_stack, wait_until
from tests.telegram.conftest import bot

__all__ = ["bot"]

_CHATS = 600
_CONNECTIONS = 5
_BURST = 12


@dataclass
class HeldModel(ScriptedClient):
    """Answers every chat, but only once ``release`` is set; counts the calls it holds."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    held: int = 0
    most_held: int = 0

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        self.held += 1
        self.most_held = max(self.most_held, self.held)
        try:
            await self.release.wait()
        finally:
            self.held -= 1
        return await super().generate_with_tools(messages, tools, tool_choice, on_text=on_text)


@pytest.mark.parametrize(
    ("env", "in_hand"),
    [
        ({"LLM_MAX_CONNECTIONS": _CONNECTIONS}, _CONNECTIONS),
        # Set on its own, WORKER_CONCURRENCY is the bound.
        ({"LLM_MAX_CONNECTIONS": _CONNECTIONS, "WORKER_CONCURRENCY": 8}, 8),
    ],
    ids=["as-many-as-connections", "worker-concurrency-set"],
)
async def test_a_process_takes_as_many_chats_as_the_model_has_connections(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    bot: Bot,
    env: dict[str, int],
    in_hand: int,
) -> None:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="in-hand",
        AUDIT_STREAM="in-hand:audit",
        **env,
    )
    model = HeldModel(lambda _messages, _tools, _choice: text_result("Ответ."))
    async with open_application(settings, llm=model) as app:
        stack = TelegramStack(app, bot, telegram=telegram)
        # A burst from more chats than the bound, queued before the workers start: their
        # first read takes all it may at once.
        for chat in range(_BURST):
            await stack.feed(telegram.message_update(20_000 + chat, "вопрос"))
        async with stack.running():
            try:
                await wait_until(lambda: model.held >= in_hand, 10, f"{in_hand} chats held")
                assert stack.side.workers.active == in_hand
            finally:
                model.release.set()
            for chat in range(_BURST):
                await telegram.wait_for_texts(20_000 + chat, 1)
    # Every chat answered, never more than the bound at once.
    assert model.most_held == in_hand


async def test_a_burst_waiting_for_the_model_is_all_in_hand_at_once(
    redis_server: RedisServer,
) -> None:
    # Built as the application builds its client: a burst queues for a connection.
    redis = async_client(RedisSettings(REDIS_URL=redis_server.url, REDIS_KEY_PREFIX="in-hand"))
    await redis.flushdb()
    defaults = make_settings()
    stack = echo_stack(
        redis,
        prefix="in-hand",
        lease_seconds=30,
        concurrency=defaults.worker.chats_in_hand(defaults.llm.max_connections),
    )
    stack.runner.gate = asyncio.Event()
    await stack.stream.ensure_group()
    for chat in range(_CHATS):
        await stack.send(10_000 + chat, "вопрос")
    running = asyncio.create_task(stack.pool.run())
    try:
        await wait_until(lambda: stack.pool.active == _CHATS, 30, f"{_CHATS} chats in hand at once")
        stack.runner.gate.set()
        await wait_until(lambda: len(stack.runner.sent) == _CHATS, 30, "every chat answered")
    finally:
        stack.runner.gate.set()
        stack.pool.stop()
        await running
        await redis.aclose()


def test_unset_worker_concurrency_follows_the_connections_up_to_its_own_bound() -> None:
    many = make_settings(LLM_MAX_CONNECTIONS=50_000)
    assert many.worker.chats_in_hand(many.llm.max_connections) == MAX_WORKER_CONCURRENCY
