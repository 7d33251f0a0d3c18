"""How many chats one process holds at once with the default settings (real redis-server).

A chat in hand mostly waits for the model, so a process that stops taking chats
while it still has model connections to spare leaves a burst to its busier
neighbour: with 512 in hand, a worker process (whose loop does no intake) filled
its slots first and the rest of a 1,000-customer burst fell to the poller
(bench/README.md, "Fifth round").
"""

import asyncio

from bot.settings import LLMSettings, RedisSettings, WorkerSettings
from bot.storage.connection import async_client
from bot.testing.redis_server import RedisServer
from tests.queue.echo_pool import echo_stack, wait_until

_CHATS = 600


def test_a_process_takes_as_many_chats_as_the_model_has_connections() -> None:
    worker = WorkerSettings.model_fields["concurrency"].default
    model = LLMSettings.model_fields["max_connections"].default
    assert worker >= model


async def test_a_burst_waiting_for_the_model_is_all_in_hand_at_once(
    redis_server: RedisServer,
) -> None:
    # Built as the application builds its client: a burst queues for a connection.
    redis = async_client(RedisSettings(REDIS_URL=redis_server.url, REDIS_KEY_PREFIX="in-hand"))
    await redis.flushdb()
    stack = echo_stack(
        redis,
        prefix="in-hand",
        lease_seconds=30,
        concurrency=WorkerSettings.model_fields["concurrency"].default,
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
