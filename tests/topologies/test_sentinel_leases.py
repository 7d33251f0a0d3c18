"""A Sentinel fail-over blocks the chats a live worker held for about the fail-over, not a lease.

Real pool and intake over the Sentinel client. The master is SIGKILLed while
the worker drains ten chats; the replica, promoted seconds later, has the
leases the worker held (replicated). A live worker still has their tokens: once
the new master answers, it finishes or hands back what it held, so each chat's
next message is answered soon after the promotion, long before those leases
would have expired.
"""

import asyncio
import contextlib
import time
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from bot.settings import RedisSettings
from bot.storage.connection import async_client
from bot.testing.redis_sentinel import SERVICE, SentinelGroup
from tests.queue.echo_pool import EchoStack, echo_stack, wait_until

# Far longer than the test waits: a chat answered at all was handed back by the live
# worker, not freed by its lease running out.
LEASE_SECONDS = 300.0
ANSWERED_WITHIN_SECONDS = 60.0
CHATS = list(range(60, 70))


async def _promoted(group: SentinelGroup, within: float) -> None:
    """Wait until a Sentinel names the replica as master."""
    sentinel = aioredis.Redis(port=group.sentinels[0].port, socket_timeout=1)
    try:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            with contextlib.suppress(RedisError, OSError):
                address: Any = await sentinel.sentinel_get_master_addr_by_name(SERVICE)
                if address and int(address[1]) == group.replica.port:
                    return
            await asyncio.sleep(0.05)
        raise AssertionError("the replica was not promoted")
    finally:
        await sentinel.aclose()


async def _send_until_accepted(stack: EchoStack, chat: int, text: str, within: float) -> None:
    """Telegram redelivers an update intake could not accept: retry until it is."""
    deadline = time.monotonic() + within
    while True:
        try:
            await stack.send(chat, text)
            return
        except (RedisError, OSError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


@pytest.mark.leaves_connections_to_gc
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_chats_a_live_worker_held_are_answered_soon_after_the_promotion(
    sentinel_group: SentinelGroup,
) -> None:
    settings = RedisSettings(
        REDIS_MODE="sentinel",
        REDIS_SENTINELS=sentinel_group.addresses,
        REDIS_SENTINEL_SERVICE=SERVICE,
        REDIS_SOCKET_TIMEOUT_SECONDS="1",
    )
    client = async_client(settings)
    stack = echo_stack(
        client, prefix="sfo", lease_seconds=LEASE_SECONDS, concurrency=16, turn_seconds=0.5
    )
    running = asyncio.create_task(stack.pool.run())
    try:
        for turn in range(3):
            for chat in CHATS:
                await stack.send(chat, f"сообщение {turn}")
        await wait_until(lambda: stack.pool.active == len(CHATS), 10, "every chat in hand")
        sentinel_group.master.stop()  # SIGKILL, with ten chats in the worker's hands
        await _promoted(sentinel_group, 30)

        for chat in CHATS:
            await _send_until_accepted(stack, chat, "после", 10)
        await wait_until(
            lambda: all("Ответ: после" in stack.runner.texts(chat) for chat in CHATS),
            ANSWERED_WITHIN_SECONDS,
            "every chat's next message answered, long before the held leases ran out",
        )
    finally:
        stack.pool.stop()
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(15):
                await running
        await client.aclose()
