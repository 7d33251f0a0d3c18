"""A live worker that sent a reply finishes its bookkeeping once Redis is back: no second send.

Redis writes every command to its append-only file before answering
(``appendfsync always``), is killed the moment the bot's reply reached the Bot
API, and comes back a few seconds later with everything it had acknowledged:
the lease, the queue, the reply's outbox entry. The worker knows it delivered
that reply; it must drop the entry when Redis answers again, not leave it for
the next drain to send again. (A process that dies in that window still sends
twice: that is the documented window, and not this test's.)
"""

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.storage.keys import RedisKeys, telegram_conversation
from bot.testing.openai_server import ScriptedOpenAIServer, text_answer, user_texts
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer
from bot.testing.settings import stack_settings
from bot.testing.telegram_server import FakeTelegramServer
from tests.queue.echo_pool import wait_until_redis

CHAT = 4242
PREFIX = "aof"
LEASE_SECONDS = 3.0
DOWN_SECONDS = 4.0
"""Longer than the lease: the lease has expired when Redis comes back."""


@pytest.fixture
def durable_redis() -> Iterator[RedisServer]:
    """A redis-server of this test that fsyncs every write (AOF, ``appendfsync always``)."""
    server = RedisServer(extra_args=("--appendonly", "yes", "--appendfsync", "always"))
    server.start()
    yield server
    server.close()


@pytest.fixture
async def observer(durable_redis: RedisServer) -> AsyncIterator[aioredis.Redis]:
    """The test's own client (it reads; it writes nothing for the bot)."""
    client = aioredis.Redis.from_url(durable_redis.url)
    yield client
    await client.aclose()


async def test_a_redis_restart_right_after_a_reply_does_not_send_it_again(
    durable_redis: RedisServer,
    observer: aioredis.Redis,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
) -> None:
    openai_server.responder = lambda body: text_answer(f"Ответ: {user_texts(body)[-1]}")
    bot = PollingBot(
        stack_settings(
            telegram,
            openai_server,
            durable_redis.url,
            prefix=PREFIX,
            SESSION_LEASE_SECONDS=LEASE_SECONDS,
        ),
        telegram,
    )
    await bot.start(within=60)
    try:
        telegram.hold_sends(CHAT)
        await telegram.push_message(CHAT, "вопрос")
        await telegram.wait_for(lambda: telegram.holding == 1, 20)
        durable_redis.stop()  # SIGKILL, with the reply on its way to Telegram
        await telegram.release_sends(CHAT)
        await telegram.wait_for(lambda: telegram.sent_texts(CHAT) == ["Ответ: вопрос"], 10)
        await _redis_down_for(DOWN_SECONDS)
        durable_redis.start()

        conversation = RedisKeys(PREFIX).conversation(telegram_conversation(CHAT))
        work = RedisKeys(PREFIX).work_stream

        async def settled() -> bool:
            # The outbox emptied, the chat released, every signal acknowledged.
            pending: Any = await observer.xpending(work, "workers")
            return (
                not await observer.exists(conversation.outbox, conversation.lease)
                and not await observer.llen(conversation.queue)
                and int(pending["pending"]) == 0
            )

        await wait_until_redis(settled, 6 * LEASE_SECONDS, "the chat settled")
        assert telegram.sent_texts(CHAT) == ["Ответ: вопрос"]
        # The chat goes on.
        await telegram.push_message(CHAT, "дальше")
        await telegram.wait_for(lambda: len(telegram.sent_texts(CHAT)) == 2, 10)
        assert telegram.sent_texts(CHAT) == ["Ответ: вопрос", "Ответ: дальше"]
    finally:
        await bot.stop()


async def _redis_down_for(seconds: float) -> None:
    """The outage itself: how long Redis stays down is the scenario, not a wait."""
    await asyncio.sleep(seconds)
