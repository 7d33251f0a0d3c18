"""A real worker pool, intake and chat queue around a job runner that echoes, for queue tests.

The runner answers as the Telegram runner does (a reply for the worker to
commit with the head job's pop; the pool then delivers and marks it
delivered) without a model or a Bot API: the claims of these tests are about
leases, signals and fail-over, not about turns.
"""

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bot.queue.admission import FloodLimits, IncomingUpdate, Intake
from bot.queue.chat_queue import ChatQueue, ChatState
from bot.queue.delivery import Delivery, Reply
from bot.queue.work_stream import WorkStream
from bot.queue.worker import HeldLease, WorkerPool, WorkerPoolConfig
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys, telegram_conversation

_UPDATE_IDS = itertools.count(1000)


@dataclass
class EchoRunner:
    """Answers ``Ответ: <text>``; ``sent`` is every delivered reply as (chat id, text)."""

    queue: ChatQueue
    turn_seconds: float = 0.0
    # Chats whose turns take this long instead.
    slow: dict[int, float] = field(default_factory=dict)
    sent: list[tuple[int, str]] = field(default_factory=list)
    # When set, every turn waits for it first, as a turn waits for the model.
    gate: asyncio.Event | None = None

    async def run(self, state: ChatState, lease: HeldLease) -> Reply:
        """The head job's reply, for the worker to commit with the job's pop."""
        assert state.head is not None
        job = state.head
        if self.gate is not None:
            await self.gate.wait()
        pause = self.slow.get(job.chat_id, self.turn_seconds)
        if pause:
            await asyncio.sleep(pause)
        return Reply.say(f"Ответ: {job.update.get('text', '')}")

    async def deliver(self, reply: Delivery, lease: HeldLease, *, blocked: bool) -> None:
        """Record the reply as sent."""
        self.sent.append((reply.chat_id, reply.text))

    async def summarise(self, lease: HeldLease) -> None:
        """Nothing to summarise here."""

    async def tell(self, reply: Delivery) -> None:
        raise AssertionError("Redis never loses a job here")

    def texts(self, chat_id: int) -> list[str]:
        """What ``chat_id`` was sent, in order."""
        return [text for chat, text in self.sent if chat == chat_id]


@dataclass
class EchoStack:
    """Intake, the work stream, the chat queue and a pool on one Redis client."""

    redis: AsyncRedisClient
    keys: RedisKeys
    stream: WorkStream
    queue: ChatQueue
    intake: Intake
    runner: EchoRunner
    pool: WorkerPool

    async def send(self, chat_id: int, text: str) -> None:
        """Accept one customer message, as the Telegram front end does."""
        await self.intake.accept(
            IncomingUpdate(
                update_id=next(_UPDATE_IDS),
                chat_id=chat_id,
                conversation_key=telegram_conversation(chat_id),
                user_id=None,
                counts_turn=False,
                payload={"text": text},
            )
        )


def echo_stack(
    redis: AsyncRedisClient,
    *,
    prefix: str,
    lease_seconds: float,
    concurrency: int = 8,
    turn_seconds: float = 0.0,
    queue_class: Callable[..., ChatQueue] = ChatQueue,
    consumer: str = "test",
) -> EchoStack:
    """The stack, built as :mod:`bot.app` and :mod:`bot.telegram.process` build theirs."""
    keys = RedisKeys(prefix)
    stream = WorkStream(redis, stream=keys.work_stream, consumer=consumer)
    queue = queue_class(redis, keys=keys, lease_seconds=lease_seconds, outbox_ttl_seconds=600)
    intake = Intake(
        redis,
        keys=keys,
        work=stream,
        limits=FloodLimits(burst=1000, interval_seconds=0.01, daily_turns=100_000),
    )
    runner = EchoRunner(queue, turn_seconds=turn_seconds)
    pool = WorkerPool(
        stream=stream,
        queue=queue,
        runner=runner,
        settings=WorkerPoolConfig(
            concurrency=concurrency,
            lease_seconds=lease_seconds,
            shutdown_grace_seconds=2,
            read_block_ms=100,
        ),
    )
    return EchoStack(redis, keys, stream, queue, intake, runner, pool)


async def wait_until(predicate: Callable[[], bool], within: float, what: str) -> float:
    """Poll ``predicate`` until true; the seconds it took. Fails with ``what`` after ``within``."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while not predicate():
        if loop.time() - started > within:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.02)
    return loop.time() - started


async def wait_until_redis(probe: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    """Poll the async ``probe`` (a Redis read) until true; fails with ``what`` after ``within``."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while True:
        if await probe():
            return
        if loop.time() - started > within:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.02)
