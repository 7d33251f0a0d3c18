"""Each lease handed a job counts once; dead letters are written once (standalone and Cluster).

Real redis-server and a real 6-node cluster (``storage_client``): the
attempt count lives under the chat's hash tag, the dead letters under their
own, and every script touches one slot.
"""

import contextlib
import json
from typing import Any

import pytest

from bot.queue.chat_queue import ChatQueue, ChatState
from bot.queue.dead_letters import DeadLetter, DeadLetters
from bot.queue.delivery import Delivery
from bot.queue.delivery_steps import SendText
from bot.queue.job_results import DropReason, JobDone, JobDropped
from bot.queue.jobs import QueuedJob
from bot.queue.work_stream import WorkStream
from bot.queue.worker import HeldLease, WorkerPool, WorkerPoolConfig
from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.keys import RedisKeys

KEY = "tg:41"


@pytest.fixture
def redis_client(storage_client: AsyncRedisClient) -> AsyncRedisClient:
    """This module's claims hold on standalone Redis and on the cluster."""
    return storage_client


def _job(job_id: str) -> QueuedJob:
    return QueuedJob(
        job_id=job_id, update_id=int(job_id), turn_id=f"T{job_id}", enqueued_ms=1, chat_id=41
    )


async def _queued(redis: AsyncRedisClient, keys: RedisKeys, *job_ids: str) -> ChatQueue:
    for job_id in job_ids:
        await redis.rpush(keys.conversation(KEY).queue, _job(job_id).model_dump_json())
    return ChatQueue(redis, keys=keys, lease_seconds=30, outbox_ttl_seconds=60)


async def _taken(queue: ChatQueue, token: str) -> ChatState:
    state = await queue.take(KEY, token)
    assert state is not None
    return state


async def test_each_lease_counts_one_attempt_and_a_repeat_counts_none(
    redis_client: AsyncRedisClient,
) -> None:
    keys = RedisKeys("attempts")
    queue = await _queued(redis_client, keys, "1", "2")

    assert (await _taken(queue, "a")).attempts == 1
    assert (await _taken(queue, "a")).attempts == 1, "the same lease again"
    await queue.release(KEY, "a")
    await queue.note_failure(KEY, "1", "RuntimeError")
    second = await _taken(queue, "b")
    assert (second.attempts, second.failure) == (2, "RuntimeError")

    assert second.head is not None
    await queue.complete(KEY, "b", second.head_raw, "1", None)
    after = await queue.delivered(KEY, "b", "")
    assert after is not None
    assert after.head is not None
    assert (after.head.job_id, after.attempts, after.failure) == ("2", 1, "")
    attempts = keys.conversation(KEY).attempts
    assert await redis_client.hexists(attempts, "2")
    assert not await redis_client.hexists(attempts, "1"), "a finished job's count is gone"


async def test_the_count_goes_with_the_chat_once_its_queue_is_empty(
    redis_client: AsyncRedisClient,
) -> None:
    keys = RedisKeys("attempts-gone")
    queue = await _queued(redis_client, keys, "1")
    state = await _taken(queue, "a")
    reply = Delivery(job_id="1", turn_id="T1", chat_id=41, steps=(SendText(text="ответ"),))

    await queue.complete(KEY, "a", state.head_raw, "1", reply)
    assert await queue.delivered(KEY, "a", "1") is None

    assert not await redis_client.exists(keys.conversation(KEY).attempts)


async def test_a_dead_letter_is_written_once_and_the_oldest_go_first(
    redis_client: AsyncRedisClient,
) -> None:
    keys = RedisKeys("dead")
    letters = DeadLetters(redis_client, keys=keys, kept=2)

    def letter(turn_id: str, at_ms: int) -> DeadLetter:
        return DeadLetter(
            turn_id=turn_id,
            update_id=at_ms,
            job_id=str(at_ms),
            attempts=3,
            error="interrupted",
            given_up_ms=at_ms,
            enqueued_ms=1,
        )

    assert await letters.record(letter("A", 10))
    assert not await letters.record(letter("A", 99)), "the first record stays"
    assert await letters.record(letter("B", 20))
    assert await letters.record(letter("C", 30))

    stored = await redis_client.hgetall(keys.dead_letters)
    assert sorted(text_of(turn) for turn in stored) == ["B", "C"], "kept: the newest two"
    assert json.loads({text_of(k): v for k, v in stored.items()}["B"])["given_up_ms"] == 20
    order: Any = await redis_client.zrange(keys.dead_letter_order, 0, -1)
    assert [text_of(turn) for turn in order] == ["B", "C"]


class _Crashes:
    """A front end whose every run raises past the dispatcher (a bug in the worker's path)."""

    async def run(self, state: ChatState, lease: HeldLease) -> JobDone:
        raise RuntimeError("boom")

    async def deliver(self, reply: Delivery, lease: HeldLease, *, blocked: bool) -> None:
        raise AssertionError("nothing to deliver")

    async def summarise(self, lease: HeldLease) -> None:
        raise AssertionError("nothing to summarise")

    async def tell(self, reply: Delivery) -> None:
        raise AssertionError("Redis never loses a job here")


async def test_a_run_that_raises_leaves_its_kind_beside_the_count(
    redis_client: AsyncRedisClient,
) -> None:
    keys = RedisKeys("attempts-crash")
    queue = await _queued(redis_client, keys, "1")
    pool = WorkerPool(
        stream=WorkStream(redis_client, stream=keys.work_stream, consumer="test"),
        queue=queue,
        runner=_Crashes(),
        settings=WorkerPoolConfig(concurrency=1, lease_seconds=30, shutdown_grace_seconds=1),
    )

    # However the pool reports the crash, the attempt and its kind stay behind.
    with contextlib.suppress(RuntimeError):
        await pool.drain_now(KEY)

    # The crashed drain's lease is left to expire, as a dead worker's would be.
    await redis_client.delete(keys.conversation(KEY).lease)
    state = await _taken(queue, "next")
    assert (state.attempts, state.failure) == (2, "RuntimeError")
    assert state.head is not None
    assert state.head.job_id == "1", "still queued"


class _StopsThePoolMidJob:
    """A front end whose run stops the pool: the chat's next job is handed back unrun."""

    def __init__(self, queue: ChatQueue) -> None:
        self.queue = queue
        self.pool: WorkerPool | None = None
        self.ran: list[str] = []

    async def run(self, state: ChatState, lease: HeldLease) -> JobDropped:
        assert state.head is not None
        assert self.pool is not None
        self.ran.append(state.head.job_id)
        self.pool.stop()
        return JobDropped(reason=DropReason.UNHANDLED)

    async def deliver(self, reply: Delivery, lease: HeldLease, *, blocked: bool) -> None:
        raise AssertionError("nothing to deliver")

    async def summarise(self, lease: HeldLease) -> None:
        raise AssertionError("nothing to summarise")

    async def tell(self, reply: Delivery) -> None:
        raise AssertionError("Redis never loses a job here")


async def test_a_job_handed_back_unrun_at_shutdown_is_not_counted_as_an_attempt(
    redis_client: AsyncRedisClient,
) -> None:
    keys = RedisKeys("attempts-handed-back")
    queue = await _queued(redis_client, keys, "1", "2")
    runner = _StopsThePoolMidJob(queue)
    pool = WorkerPool(
        stream=WorkStream(redis_client, stream=keys.work_stream, consumer="test"),
        queue=queue,
        runner=runner,
        settings=WorkerPoolConfig(concurrency=1, lease_seconds=30, shutdown_grace_seconds=1),
    )
    runner.pool = pool

    # Job 1 runs; the pool is stopping by then, so job 2 is handed back without a run,
    # as in every rolling deploy. Three deploys must not make it a dead letter.
    await pool.drain_now(KEY)

    assert runner.ran == ["1"]
    state = await _taken(queue, "next")
    assert state.head is not None
    assert (state.head.job_id, state.attempts) == ("2", 1), "this lease is its first attempt"
