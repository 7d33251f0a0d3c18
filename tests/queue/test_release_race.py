"""A signal that lands while a drain is releasing its chat is not lost (real pool, real intake).

The drain's last script releases the lease in Redis; its reply is still on its
way back when intake (seeing no lease) signals the chat's next message and the
pool reads that signal. The pool must not take the signal for one its drain
covers: that drain is over as far as Redis knows.
"""

import asyncio
import contextlib
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.queue.chat_queue import ChatQueue, ChatState
from bot.queue.work_stream import GROUP
from tests.queue.echo_pool import echo_stack, wait_until, wait_until_redis

# Long enough that no sweep or reclaim (two leases) can rescue a lost signal while the
# test waits: an answer within the test's wait is the pool's own doing.
LEASE_SECONDS = 30.0
ANSWER_WITHIN_SECONDS = 20.0


class _ResumesLateAfterRelease(ChatQueue):
    """The real queue; after the script that releases the chat, the drain waits for the test."""

    released = asyncio.Event()
    resume = asyncio.Event()

    async def delivered(
        self, conversation_key: str, token: str, job_id: str, *, keep: bool = False
    ) -> ChatState | None:
        state = await super().delivered(conversation_key, token, job_id, keep=keep)
        if state is None and not type(self).released.is_set():
            type(self).released.set()
            await type(self).resume.wait()
        return state


async def _pending_signals(redis: aioredis.Redis, stream: str) -> int:
    """Signals the pool read and has not acknowledged (a drain keeps its own pending)."""
    summary: Any = await redis.xpending(stream, GROUP)
    return int(summary["pending"])


async def test_a_message_signalled_while_its_chat_is_being_released_is_answered(
    redis_client: aioredis.Redis,
) -> None:
    _ResumesLateAfterRelease.released = asyncio.Event()
    _ResumesLateAfterRelease.resume = asyncio.Event()
    stack = echo_stack(
        redis_client,
        prefix="race",
        lease_seconds=LEASE_SECONDS,
        queue_class=_ResumesLateAfterRelease,
    )
    running = asyncio.create_task(stack.pool.run())
    try:
        await stack.send(7, "первое")
        async with asyncio.timeout(10):
            await _ResumesLateAfterRelease.released.wait()
        # The lease is gone in Redis; the drain has not heard yet.
        assert not await redis_client.exists(stack.keys.conversation("tg:7").lease)
        await stack.send(7, "второе")

        # The pool read the new signal (the held drain's own is pending too) ...
        async def signal_read() -> bool:
            return await _pending_signals(redis_client, stack.keys.work_stream) == 2

        await wait_until_redis(signal_read, 10, "the signal read")
        # ... and kept it for after the drain: nothing answers it while the drain is held.
        assert stack.runner.texts(7) == ["Ответ: первое"]
        _ResumesLateAfterRelease.resume.set()
        # Answered once the drain resumes, not by a sweep (two leases) or a next message.
        await wait_until(
            lambda: len(stack.runner.texts(7)) == 2,
            ANSWER_WITHIN_SECONDS,
            "the second message answered",
        )
        assert stack.runner.texts(7) == ["Ответ: первое", "Ответ: второе"]
        await wait_until(lambda: stack.pool.active == 0, 5, "the pool idle")
        assert await redis_client.llen(stack.keys.conversation("tg:7").queue) == 0
    finally:
        _ResumesLateAfterRelease.resume.set()
        stack.pool.stop()
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(10):
                await running


@pytest.mark.parametrize("signals", [2, 3])
async def test_extra_signals_for_a_chat_in_hand_cost_one_more_look_only(
    redis_client: aioredis.Redis, signals: int
) -> None:
    stack = echo_stack(redis_client, prefix="extra", lease_seconds=LEASE_SECONDS, turn_seconds=0.3)
    running = asyncio.create_task(stack.pool.run())
    try:
        await stack.send(8, "вопрос")
        await wait_until(lambda: stack.pool.active == 1, 5, "the chat in hand")
        for _ in range(signals):
            await stack.stream.signal("tg:8")
        await wait_until(lambda: stack.runner.texts(8) == ["Ответ: вопрос"], 5, "answered")
        await wait_until(lambda: stack.pool.active == 0, 5, "the pool idle")

        # Every signal acknowledged: nothing is left for a reclaim a lease later.
        async def nothing_pending() -> bool:
            summary = await redis_client.xpending(stack.keys.work_stream, "workers")
            return int(summary["pending"]) == 0

        await wait_until_redis(nothing_pending, 5, "every signal acknowledged")
        assert stack.runner.texts(8) == ["Ответ: вопрос"]
    finally:
        stack.pool.stop()
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(10):
                await running
