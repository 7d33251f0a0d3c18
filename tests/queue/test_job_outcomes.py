"""The worker alone finishes a job, from the outcome the front end's runner returns.

A real redis-server; the runner is scripted per job id (what a Telegram
handler would have decided), so each outcome value is seen to lead the worker
to its own finishing: pop with the reply, pop without one, deliver what a
handler committed itself, and a run over the deadline counted as a failed
attempt and handed back at once.
"""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from bot.queue.chat_queue import ChatQueue, ChatState
from bot.queue.delivery import Delivery, Reply
from bot.queue.delivery_steps import SendText
from bot.queue.job_results import DropReason, JobDone, JobDropped, JobOutcome
from bot.queue.jobs import QueuedJob
from bot.queue.work_stream import WorkStream
from bot.queue.worker import DEADLINE_EXCEEDED, HeldLease, WorkerPool, WorkerPoolConfig
from bot.storage.keys import RedisKeys

KEY = "tg:51"

Script = Callable[[ChatState, HeldLease], Awaitable[JobOutcome]]


def _job(job_id: str) -> QueuedJob:
    return QueuedJob(
        job_id=job_id, update_id=int(job_id), turn_id=f"T{job_id}", enqueued_ms=1, chat_id=51
    )


def _reply(job_id: str, text: str) -> Delivery:
    return Delivery(job_id=job_id, turn_id=f"T{job_id}", chat_id=51, steps=(SendText(text=text),))


@dataclass
class _Scripted:
    """Runs each job as its script says; records deliveries, summaries and direct tellings."""

    scripts: dict[str, Script]
    delivered: list[str] = field(default_factory=list)
    summarised: int = 0
    told: list[str] = field(default_factory=list)

    async def run(self, state: ChatState, lease: HeldLease) -> JobOutcome:
        assert state.head is not None
        return await self.scripts[state.head.job_id](state, lease)

    async def deliver(self, reply: Delivery, lease: HeldLease, *, blocked: bool) -> None:
        self.delivered.append(reply.text)

    async def summarise(self, lease: HeldLease) -> None:
        self.summarised += 1

    async def tell(self, reply: Delivery) -> None:
        self.told.append(reply.text)


@dataclass
class _Stack:
    redis: aioredis.Redis
    keys: RedisKeys
    queue: ChatQueue
    stream: WorkStream

    def pool(self, runner: _Scripted, *, deadline: float = 30.0) -> WorkerPool:
        return WorkerPool(
            stream=self.stream,
            queue=self.queue,
            runner=runner,
            settings=WorkerPoolConfig(
                concurrency=1,
                lease_seconds=30,
                shutdown_grace_seconds=1,
                job_deadline_seconds=deadline,
            ),
        )

    async def queued(self) -> list[str]:
        raw = await self.redis.lrange(self.keys.conversation(KEY).queue, 0, -1)
        return [QueuedJob.model_validate_json(item).job_id for item in raw]

    async def outbox(self) -> int:
        return int(await self.redis.hlen(self.keys.conversation(KEY).outbox))

    async def leased(self) -> bool:
        return bool(await self.redis.exists(self.keys.conversation(KEY).lease))


async def _stack(
    redis: aioredis.Redis,
    prefix: str,
    *job_ids: str,
    queue_class: Callable[..., ChatQueue] = ChatQueue,
) -> _Stack:
    keys = RedisKeys(prefix)
    for job_id in job_ids:
        await redis.rpush(keys.conversation(KEY).queue, _job(job_id).model_dump_json())
    queue = queue_class(redis, keys=keys, lease_seconds=30, outbox_ttl_seconds=60)
    stream = WorkStream(redis, stream=keys.work_stream, consumer="test")
    return _Stack(redis, keys, queue, stream)


def _answer(text: str) -> Script:
    async def script(state: ChatState, lease: HeldLease) -> JobOutcome:
        assert state.head is not None
        return Reply.say(text)

    return script


def _drop(reason: DropReason) -> Script:
    async def script(state: ChatState, lease: HeldLease) -> JobOutcome:
        return JobDropped(reason=reason)

    return script


def _committed_by_handler(queue: ChatQueue, text: str, *, summary_due: bool = False) -> Script:
    """A chat turn's way: its own commit pops the job (with the session) and stores the reply."""

    async def script(state: ChatState, lease: HeldLease) -> JobOutcome:
        assert state.head is not None
        entry = _reply(state.head.job_id, text)
        await queue.complete(KEY, lease.token, state.head_raw, state.head.job_id, entry)
        return JobDone(delivery=entry, summary_due=summary_due)

    return script


async def test_a_reply_is_committed_with_the_pop_then_delivered_and_the_chat_released(
    redis_client: aioredis.Redis,
) -> None:
    stack = await _stack(redis_client, "outcome-reply", "1", "2")
    runner = _Scripted({"1": _answer("один"), "2": _answer("два")})

    await stack.pool(runner).drain_now(KEY)

    assert runner.delivered == ["один", "два"], "each reply once, in queue order"
    assert await stack.queued() == []
    assert await stack.outbox() == 0, "delivered replies leave the outbox"
    assert not await stack.leased(), "an empty queue releases the chat"


async def test_a_dropped_job_is_popped_and_nothing_is_delivered(
    redis_client: aioredis.Redis,
) -> None:
    stack = await _stack(redis_client, "outcome-dropped", "1", "2")
    runner = _Scripted({"1": _drop(DropReason.UNHANDLED), "2": _answer("после")})

    await stack.pool(runner).drain_now(KEY)

    assert runner.delivered == ["после"], "the dropped job says nothing; the next is answered"
    assert await stack.queued() == []
    assert await stack.outbox() == 0


async def test_a_job_its_handler_committed_is_delivered_once_and_summarised_under_the_lease(
    redis_client: aioredis.Redis,
) -> None:
    stack = await _stack(redis_client, "outcome-done", "1")
    runner = _Scripted({"1": _committed_by_handler(stack.queue, "ход", summary_due=True)})

    await stack.pool(runner).drain_now(KEY)

    assert runner.delivered == ["ход"]
    assert runner.summarised == 1
    assert await stack.queued() == []
    assert await stack.outbox() == 0
    assert not await stack.leased()


async def test_a_reply_for_a_job_committed_before_delivers_the_stored_reply(
    redis_client: aioredis.Redis,
) -> None:
    """A turn whose commit landed although its caller heard a failure: its answer wins."""
    stack = await _stack(redis_client, "outcome-stored", "1")

    async def committed_then_failed(state: ChatState, lease: HeldLease) -> JobOutcome:
        assert state.head is not None
        await stack.queue.complete(
            KEY, lease.token, state.head_raw, "1", _reply("1", "настоящий ответ")
        )
        return Reply.say("текст о сбое")

    runner = _Scripted({"1": committed_then_failed})

    await stack.pool(runner).drain_now(KEY)

    assert runner.delivered == ["настоящий ответ"]
    assert await stack.outbox() == 0


async def test_a_run_over_the_deadline_is_a_failed_attempt_handed_back_at_once(
    redis_client: aioredis.Redis,
) -> None:
    stack = await _stack(redis_client, "outcome-deadline", "1", "2")
    cancelled = asyncio.Event()

    async def hangs(state: ChatState, lease: HeldLease) -> JobOutcome:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        raise AssertionError("never returns")

    runner = _Scripted({"1": hangs, "2": _answer("два")})

    await stack.pool(runner, deadline=0.2).drain_now(KEY)

    assert cancelled.is_set(), "the overrunning run was cancelled"
    assert runner.delivered == [], "no outcome, nothing said"
    assert await stack.queued() == ["1", "2"], "the job stays queued for its next attempt"
    assert not await stack.leased(), "handed back at once, not left to expire"
    assert await redis_client.xlen(stack.keys.work_stream) == 1, "and signalled again"
    state = await stack.queue.take(KEY, "next")
    assert state is not None
    assert (state.attempts, state.failure) == (2, DEADLINE_EXCEEDED)


async def test_a_timeout_inside_the_run_is_not_taken_for_the_deadline(
    redis_client: aioredis.Redis,
) -> None:
    stack = await _stack(redis_client, "outcome-own-timeout", "1")

    async def times_out(state: ChatState, lease: HeldLease) -> JobOutcome:
        raise TimeoutError("a library's own timeout")

    runner = _Scripted({"1": times_out})

    # However the pool reports it, the attempt is the run's own failure, not an overrun.
    with contextlib.suppress(TimeoutError):
        await stack.pool(runner).drain_now(KEY)

    await redis_client.delete(stack.keys.conversation(KEY).lease)
    state = await stack.queue.take(KEY, "next")
    assert state is not None
    assert (state.attempts, state.failure) == (2, "TimeoutError")


class _CommitConnectionDrops(ChatQueue):
    """The connection drops as the worker stores a reply; ``empties`` Redis first (a restart)."""

    def __init__(self, redis: aioredis.Redis, *, empties: bool, **kwargs: Any) -> None:
        super().__init__(redis, **kwargs)
        self._client = redis
        self._empties = empties

    async def complete(
        self,
        conversation_key: str,
        token: str,
        job_raw: str,
        job_id: str,
        reply: Delivery | None,
    ) -> bool:
        if self._empties:
            await self._client.delete(self.keys(conversation_key).queue)
        raise RedisConnectionError("connection reset")


async def test_a_reply_whose_job_redis_lost_is_told_directly(
    redis_client: aioredis.Redis,
) -> None:
    stack = await _stack(
        redis_client, "outcome-lost", "1", queue_class=partial(_CommitConnectionDrops, empties=True)
    )
    runner = _Scripted({"1": _answer("сервис недоступен")})

    await stack.pool(runner).drain_now(KEY)

    assert runner.told == ["сервис недоступен"], "nothing else will ever answer this job"
    assert runner.delivered == []


async def test_a_reply_whose_job_redis_kept_is_not_told_the_job_runs_again(
    redis_client: aioredis.Redis,
) -> None:
    stack = await _stack(
        redis_client,
        "outcome-kept",
        "1",
        queue_class=partial(_CommitConnectionDrops, empties=False),
    )
    runner = _Scripted({"1": _answer("сервис недоступен")})

    await stack.pool(runner).drain_now(KEY)

    assert runner.told == [], "a job Redis kept is answered by its next run"
    assert runner.delivered == []
    assert await stack.queued() == ["1"]
    assert not await stack.leased(), "handed back once Redis answers"
