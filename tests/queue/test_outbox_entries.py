"""An outbox entry this version cannot read never stops its chat (real redis-server, WorkerPool).

An entry written by another version (a field this one does not know) is
delivered; one that is not an entry at all is moved to the chat's quarantine,
and the chat goes on with its queue. Both without spinning: the script calls
of the whole drain are counted.
"""

import asyncio
import json

import redis.asyncio as aioredis

from bot.queue.chat_queue import ChatQueue, ChatState
from bot.queue.delivery import Delivery, Reply
from bot.queue.delivery_steps import SendText
from bot.queue.jobs import QueuedJob
from bot.queue.work_stream import WorkStream
from bot.queue.worker import HeldLease, WorkerPool, WorkerPoolConfig
from bot.storage.keys import RedisKeys

KEY = "tg:31"
DRAIN_WITHIN = 10.0
# take, delivered per outbox entry, the job's complete and delivered, the release; a few spare.
MOST_SCRIPT_CALLS = 12


class _Recording:
    """A front end that answers every job with one plain reply and records what it sends."""

    def __init__(self, queue: ChatQueue) -> None:
        self._queue = queue
        self.sent: list[str] = []

    async def run(self, state: ChatState, lease: HeldLease) -> Reply:
        assert state.head is not None
        return Reply.say(f"ответ {state.head.job_id}")

    async def deliver(self, reply: Delivery, lease: HeldLease, *, blocked: bool) -> None:
        self.sent.append(reply.text)

    async def summarise(self, lease: HeldLease) -> None:
        raise AssertionError("no summary here")

    async def tell(self, reply: Delivery) -> None:
        raise AssertionError("Redis never loses a job here")


def _reply(job_id: str, text: str) -> Delivery:
    return Delivery(job_id=job_id, turn_id=f"T{job_id}", chat_id=31, steps=(SendText(text=text),))


def _pool(redis: aioredis.Redis, keys: RedisKeys) -> tuple[WorkerPool, _Recording]:
    queue = ChatQueue(redis, keys=keys, lease_seconds=5, outbox_ttl_seconds=60)
    runner = _Recording(queue)
    pool = WorkerPool(
        stream=WorkStream(redis, stream=keys.work_stream, consumer="test"),
        queue=queue,
        runner=runner,
        settings=WorkerPoolConfig(concurrency=1, lease_seconds=5, shutdown_grace_seconds=1),
    )
    return pool, runner


async def _script_calls(redis: aioredis.Redis) -> int:
    stats = await redis.info("commandstats")
    names = ("evalsha", "eval")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in names)


async def test_an_entry_with_a_field_this_version_does_not_know_is_delivered(
    redis_client: aioredis.Redis,
) -> None:
    keys = RedisKeys("outbox-newer")
    chat = keys.conversation(KEY)
    written_by_a_newer_version = {**_reply("7", "ответ 7").model_dump(), "priority": "high"}
    await redis_client.hset(chat.outbox, "7", json.dumps(written_by_a_newer_version))
    pool, runner = _pool(redis_client, keys)
    before = await _script_calls(redis_client)

    async with asyncio.timeout(DRAIN_WITHIN):
        await pool.drain_now(KEY)

    assert runner.sent == ["ответ 7"]
    assert await _script_calls(redis_client) - before <= MOST_SCRIPT_CALLS
    assert await redis_client.hlen(chat.outbox) == 0
    assert not await redis_client.exists(chat.lease), "the chat is released"


async def test_an_unreadable_entry_is_quarantined_and_the_chat_goes_on(
    redis_client: aioredis.Redis,
) -> None:
    keys = RedisKeys("outbox-bad")
    chat = keys.conversation(KEY)
    await redis_client.hset(chat.outbox, "6", "{not an outbox entry")
    job = QueuedJob(job_id="8", update_id=8, turn_id="T8", enqueued_ms=1, chat_id=31)
    await redis_client.rpush(chat.queue, job.model_dump_json())
    pool, runner = _pool(redis_client, keys)
    before = await _script_calls(redis_client)

    async with asyncio.timeout(DRAIN_WITHIN):
        await pool.drain_now(KEY)

    assert runner.sent == ["ответ 8"], "the next job ran and was delivered"
    assert await _script_calls(redis_client) - before <= MOST_SCRIPT_CALLS
    assert await redis_client.hlen(chat.outbox) == 0
    assert await redis_client.llen(chat.queue) == 0
    assert not await redis_client.exists(chat.lease), "the chat is released"
    assert await redis_client.hgetall(chat.outbox_quarantine) == {b"6": b"{not an outbox entry"}
    assert await redis_client.ttl(chat.outbox_quarantine) > 0


async def test_entries_that_appear_while_the_chat_is_held_are_read_before_it_is_released(
    redis_client: aioredis.Redis,
) -> None:
    """``delivered`` never reports an empty chat while its outbox holds entries: it returns them."""
    keys = RedisKeys("outbox-late")
    chat = keys.conversation(KEY)
    queue = ChatQueue(redis_client, keys=keys, lease_seconds=5, outbox_ttl_seconds=60)
    assert await queue.take(KEY, "token") is not None
    await redis_client.hset(chat.outbox, "6", "not json")
    await redis_client.hset(chat.outbox, "7", _reply("7", "ответ 7").model_dump_json())

    state = await queue.delivered(KEY, "token", "")

    assert state is not None
    assert [entry.job_id for entry in state.outbox] == ["7"]
    assert await redis_client.hgetall(chat.outbox_quarantine) == {b"6": b"not json"}
    assert await queue.delivered(KEY, "token", "7") is None, "then released"
