"""The idle sweep of handoffs: a check that did not end the handoff is queued again, once.

Real Redis, the real intake script and chat queue; the sweeper's clock is
the test's. A worker whose idle check fails (its commit is refused) pops the
job and leaves the handoff open (:mod:`bot.telegram.update_jobs`); the test
pops it the same way, through the chat queue.
"""

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
import redis.asyncio as aioredis

from bot.handoff.sweeper import HandoffSweeper
from bot.handoff.topics import TopicDirectory
from bot.queue.admission import FloodLimits, Intake
from bot.queue.chat_queue import ChatQueue
from bot.queue.jobs import Notice, QueuedJob
from bot.queue.work_stream import WorkStream
from bot.sessions.handoff_machine import IdleRule
from bot.storage.keys import RedisKeys

pytestmark = pytest.mark.timeout(30)

STAFF = -1001234567890
CONVERSATION = "tg:701"
IDLE_SECONDS = 600.0
RETRY_SECONDS = 60.0
ACTIVITY_MS = 1_700_000_000_000


@dataclass
class Clock:
    """Wall-clock seconds that move only when the test moves them."""

    now: float

    def __call__(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)


@dataclass
class Sweep:
    """The pieces of one process's idle sweep, and a way to see the chat's queue."""

    redis: aioredis.Redis
    keys: RedisKeys
    topics: TopicDirectory
    intake: Intake
    queue: ChatQueue
    clock: Clock

    def sweeper(self) -> HandoffSweeper:
        return HandoffSweeper(
            topics=self.topics,
            intake=self.intake,
            idle=IdleRule(idle_seconds=IDLE_SECONDS, clock=self.clock),
            retry_seconds=RETRY_SECONDS,
        )

    async def queued_checks(self) -> list[QueuedJob]:
        raw = await self.redis.lrange(self.keys.conversation(CONVERSATION).queue, 0, -1)
        jobs = [QueuedJob.model_validate_json(item) for item in raw]
        return [job for job in jobs if job.notice is Notice.HANDOFF_IDLE]

    async def fail_the_check(self) -> None:
        """What a worker does when the idle check's commit fails: pop it, handoff still open."""
        state = await self.queue.take(CONVERSATION, "worker-token")
        assert state is not None
        assert state.head is not None
        assert state.head.notice is Notice.HANDOFF_IDLE
        await self.queue.complete(
            CONVERSATION, "worker-token", state.head_raw, state.head.job_id, None
        )
        await self.queue.release(CONVERSATION, "worker-token")


@pytest.fixture
async def sweep(redis_client: aioredis.Redis) -> Sweep:
    keys = RedisKeys("sweep")
    topics = TopicDirectory(redis_client, keys=keys, staff_chat_id=STAFF)
    intake = Intake(
        redis_client,
        keys=keys,
        work=WorkStream(redis_client, stream=keys.work_stream, consumer="sweep-test"),
        limits=FloodLimits(burst=5, interval_seconds=1.0, daily_turns=100),
    )
    queue = ChatQueue(redis_client, keys=keys, lease_seconds=5, outbox_ttl_seconds=3600)
    await topics.touch(CONVERSATION, ACTIVITY_MS)
    return Sweep(
        redis_client, keys, topics, intake, queue, Clock(ACTIVITY_MS / 1000 + IDLE_SECONDS + 1)
    )


async def test_a_failed_idle_check_is_queued_again_after_the_retry_delay(sweep: Sweep) -> None:
    assert await sweep.sweeper().sweep() == 1
    assert len(await sweep.queued_checks()) == 1
    await sweep.fail_the_check()
    assert await sweep.queued_checks() == []

    sweep.clock.now += RETRY_SECONDS
    await sweep.sweeper().sweep()

    retried = await sweep.queued_checks()
    assert len(retried) == 1
    # Another attempt, so another update id (intake keeps ids it saw for 24 h).
    assert retried[0].update_id != -ACTIVITY_MS


async def test_sweeps_of_one_idle_period_queue_one_check_however_many_sweepers(
    sweep: Sweep,
) -> None:
    sweepers = [sweep.sweeper() for _ in range(4)]
    await asyncio.gather(*(sweeper.sweep() for sweeper in sweepers for _ in range(3)))
    sweep.clock.now += RETRY_SECONDS / 2
    await asyncio.gather(*(sweeper.sweep() for sweeper in sweepers))

    assert len(await sweep.queued_checks()) == 1


async def test_activity_after_a_sweep_read_the_index_is_never_overwritten(sweep: Sweep) -> None:
    """Postponing a due handoff is a compare-and-set, safe to run twice."""
    later_ms = ACTIVITY_MS + 5_000
    await sweep.topics.touch(CONVERSATION, later_ms)

    for _ in range(2):
        assert not await sweep.topics.postpone(CONVERSATION, due_ms=ACTIVITY_MS, until_ms=9)
    assert await sweep.topics.idle(later_ms) == [(CONVERSATION, later_ms)]

    for _ in range(2):
        assert await sweep.topics.postpone(CONVERSATION, due_ms=later_ms, until_ms=later_ms + 7)
    assert await sweep.topics.idle(later_ms + 7) == [(CONVERSATION, later_ms + 7)]
