"""A worker frozen past its lease finds the chat taken: it completes nothing, sends nothing.

The heartbeat test (tests/durability) freezes a real process with SIGSTOP; here the
same order of scripts runs on the real queue, without processes: the taker answers
the job and has not yet delivered it when the frozen worker wakes up.
"""

import pytest
import redis.asyncio as aioredis

from bot.queue.chat_queue import ChatQueue, LeaseLostError
from bot.queue.delivery import Delivery
from bot.queue.delivery_steps import SendText
from bot.queue.jobs import QueuedJob
from bot.storage.keys import RedisKeys

KEY = "tg:5"


def _reply(text: str) -> Delivery:
    return Delivery(job_id="1", turn_id="T1", chat_id=5, steps=(SendText(text=text),))


async def test_a_frozen_workers_completion_of_a_job_its_taker_answered_is_refused(
    redis_client: aioredis.Redis,
) -> None:
    keys = RedisKeys("frozen")
    queue = ChatQueue(redis_client, keys=keys, lease_seconds=3, outbox_ttl_seconds=60)
    job = QueuedJob(job_id="1", update_id=1, turn_id="T1", enqueued_ms=1, chat_id=5)
    await redis_client.rpush(keys.conversation(KEY).queue, job.model_dump_json())
    frozen = await queue.take(KEY, "frozen-token")
    assert frozen is not None
    # Frozen (SIGSTOP) past its lease: the lease expires and another worker takes the chat.
    await redis_client.delete(keys.conversation(KEY).lease)
    taker = await queue.take(KEY, "taker-token")
    assert taker is not None
    assert await queue.complete(KEY, "taker-token", taker.head_raw, "1", _reply("ответ"))

    # Woken up, its turn failed (its Redis calls timed out): it must not take the
    # taker's undelivered entry for its own earlier completion and send anything.
    with pytest.raises(LeaseLostError):
        await queue.complete(
            KEY, "frozen-token", frozen.head_raw, "1", _reply("Сервис временно недоступен")
        )
    state = await queue.take(KEY, "taker-token")
    assert state is not None
    assert [entry.text for entry in state.outbox] == ["ответ"]
