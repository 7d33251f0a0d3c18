"""Every Redis script of the project, run twice with the same arguments, leaves the same state.

redis-py retries a command that timed out, and Redis may still run the first
attempt: each script must be safe to repeat. Each case prepares a chat, runs
the production call once, takes a snapshot of every key (type, value, whether
it expires), runs the same call again and compares.

A signal on the work stream may be sent twice: an extra signal is harmless (a
worker that finds nothing to do acknowledges it), so the stream is compared as
the set of conversations signalled, and the index of signalled chats beside it
as its members (a repeat scores the chat by its newer signal).
"""

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.handoff.topics import TopicDirectory
from bot.queue.chat_queue import ChatQueue, LeaseLostError
from bot.queue.dead_letters import DeadLetter, DeadLetters
from bot.queue.intake import FloodLimits, IncomingUpdate, Intake, IntakeVerdict, StaffSender
from bot.queue.jobs import OutboxEntry
from bot.queue.work_stream import WorkStream
from bot.sessions.models import ConversationSession
from bot.sessions.redis_store import RedisSessionStore
from bot.sessions.store import JobCompletion
from bot.shop.redis_demo import RedisDemoShop
from bot.storage.keys import RedisKeys
from tools.shop_backend import Customer
from tools.store import ShopStore

PREFIX = "twice"
STREAM = f"{PREFIX}:audit"
KEY = "tg:77"
TOKEN = "lease-token-of-this-test"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)

Step = Callable[[], Awaitable[Any]]


class Chat:
    """The production objects over one Redis, and one chat's inputs."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self.keys = RedisKeys(PREFIX)
        self.work = WorkStream(redis, stream=self.keys.work_stream, consumer="tester")
        self.intake = Intake(
            redis,
            keys=self.keys,
            work=self.work,
            limits=FloodLimits(burst=5, interval_seconds=1.0, daily_turns=100),
            clock_ms=lambda: 1_796_300_000_000,
        )
        self.queue = ChatQueue(redis, keys=self.keys, lease_seconds=3, outbox_ttl_seconds=3600)
        self.sessions = RedisSessionStore(
            redis, keys=self.keys, ttl_seconds=3600, archive_ttl_seconds=7200
        )
        self.audit = RedisStreamAuditSink(redis, stream=STREAM, maxlen=1000)

    def update(self, update_id: int) -> IncomingUpdate:
        """A text message of the chat."""
        return IncomingUpdate(
            update_id=update_id,
            chat_id=77,
            conversation_key=KEY,
            user_id=77,
            counts_turn=True,
            payload={"update_id": update_id, "message": {"text": f"вопрос {update_id}"}},
        )

    async def queued(self, *update_ids: int) -> None:
        """Accept updates and take the lease."""
        for update_id in update_ids:
            assert await self.intake.accept(self.update(update_id)) is IntakeVerdict.QUEUED
        assert await self.queue.take(KEY, TOKEN) is not None

    async def head(self) -> tuple[str, str]:
        """The head job's raw JSON and id."""
        state = await self.queue.take(KEY, TOKEN)
        assert state is not None
        assert state.head is not None
        return state.head_raw, state.head.job_id

    def reply(self, job_id: str) -> OutboxEntry:
        """A reply to ``job_id`` with its audit entry."""
        return OutboxEntry(
            job_id=job_id,
            turn_id=f"T{job_id}",
            chat_id=77,
            format="answer",
            text=f"ответ {job_id}",
            audit=({"type": "turn", "turn_id": f"T{job_id}", "outcome": "answered"},),
        )

    async def snapshot(self) -> dict[str, Any]:
        """Every key: type, value, whether it expires (the work stream: who was signalled)."""
        state: dict[str, Any] = {}
        async for raw in self.redis.scan_iter(match="*"):
            key = raw.decode() if isinstance(raw, bytes) else str(raw)
            raw_kind = await self.redis.type(key)
            kind = raw_kind.decode() if isinstance(raw_kind, bytes) else str(raw_kind)
            value: Any
            if kind == "string":
                value = await self.redis.get(key)
            elif kind == "hash":
                value = await self.redis.hgetall(key)
            elif kind == "list":
                value = await self.redis.lrange(key, 0, -1)
            elif kind == "set":
                value = sorted(await self.redis.smembers(key))
            elif kind == "zset" and key == RedisKeys.work_queued(self.keys.work_stream):
                value = sorted(await self.redis.zrange(key, 0, -1))
            elif kind == "zset":
                value = await self.redis.zrange(key, 0, -1, withscores=True)
            elif kind == "stream":
                entries = await self.redis.xrange(key) or []
                rows = [tuple(sorted((fields or {}).items())) for _, fields in entries]
                value = sorted(set(rows)) if key == self.keys.work_stream else rows
            else:
                pytest.fail(f"unexpected {kind} at {key}")
            state[key] = (kind, value, await self.redis.ttl(key) > 0)
        return state


async def intake_step(chat: Chat) -> Step:
    return lambda: chat.intake.accept(chat.update(1))


async def take_step(chat: Chat) -> Step:
    await chat.intake.accept(chat.update(1))
    return lambda: chat.queue.take(KEY, TOKEN)


async def renew_step(chat: Chat) -> Step:
    await chat.queued(1)
    return lambda: chat.queue.renew(KEY, TOKEN)


async def complete_step(chat: Chat) -> Step:
    await chat.queued(1, 2)
    raw, job_id = await chat.head()
    return lambda: chat.queue.complete(KEY, TOKEN, raw, job_id, chat.reply(job_id))


async def delivered_step(chat: Chat) -> Step:
    await chat.queued(1, 2)
    raw, job_id = await chat.head()
    await chat.queue.complete(KEY, TOKEN, raw, job_id, chat.reply(job_id))
    return lambda: chat.queue.delivered(KEY, TOKEN, job_id)


async def delivered_last_step(chat: Chat) -> Step:
    await chat.queued(1)
    raw, job_id = await chat.head()
    await chat.queue.complete(KEY, TOKEN, raw, job_id, chat.reply(job_id))

    async def step() -> Any:
        # The first run released the lease (the queue was empty): a repeat finds it gone
        # and says so, changing nothing; the worker then hands the chat back.
        try:
            return await chat.queue.delivered(KEY, TOKEN, job_id)
        except LeaseLostError:
            return "lease gone"

    return step


async def release_unrun_step(chat: Chat) -> Step:
    await chat.queued(1, 2)
    state = await chat.queue.take(KEY, TOKEN)
    assert state is not None
    assert state.head is not None
    unrun = state.head.job_id
    # Stopping before the head job ran: the lease goes, and the job's attempt with it.
    return lambda: chat.queue.release(KEY, TOKEN, unrun_job_id=unrun)


async def session_commit_step(chat: Chat, *, answered: bool = False, handoff: bool = False) -> Step:
    await chat.queued(1)
    raw, job_id = await chat.head()
    state = await chat.queue.take(KEY, TOKEN)
    assert state is not None
    locked = await chat.sessions.held(KEY, TOKEN, state.session_version, state.session_data)
    session = ConversationSession.start(KEY, NOW, "support_chat", "1.2.0").with_turn(
        "вопрос 1", "ответ 1", NOW, "1.2.0", turn_id="T1"
    )
    if handoff:
        session = session.with_handoff("human", NOW)
    completion = JobCompletion(
        job_raw=raw,
        job_id=job_id,
        outbox_entry=chat.reply(job_id).model_dump_json(),
        answered=answered,
    )
    if answered:
        # Failures before it: the answered turn's commit ends their run.
        await TopicDirectory(chat.redis, keys=chat.keys, staff_chat_id=-1001).record_failure(
            KEY, "T0"
        )
    return lambda: chat.sessions.commit(locked, session, completion=completion, release=False)


async def audit_step(chat: Chat) -> Step:
    rows = [
        {"type": "turn", "turn_id": "T1", "chat_id": "77", "outcome": "answered"},
        {"type": "tool", "turn_id": "T1", "chat_id": "77", "tool_name": "get_order_status"},
    ]
    return lambda: chat.audit.write_fields(rows)


async def quarantine_step(chat: Chat) -> Step:
    await chat.intake.accept(chat.update(1))
    await chat.redis.hset(chat.keys.conversation(KEY).outbox, "0", "{unreadable")
    return lambda: chat.queue.take(KEY, TOKEN)


async def note_failure_step(chat: Chat) -> Step:
    await chat.queued(1)
    return lambda: chat.queue.note_failure(KEY, "1", "RuntimeError")


async def dead_letter_step(chat: Chat) -> Step:
    letter = DeadLetter(
        turn_id="T1",
        update_id=1,
        job_id="1",
        attempts=3,
        error="interrupted",
        given_up_ms=1_796_300_000_000,
        enqueued_ms=1_796_299_000_000,
    )
    return lambda: DeadLetters(chat.redis, keys=chat.keys).record(letter)


async def shop_write_step(chat: Chat) -> Step:
    shop = RedisDemoShop(chat.redis, chat.keys, ShopStore.load(), clock=lambda: NOW)
    customer = Customer(user_id=77, chat_id=77)
    # A repeated confirmation: the same action id as the idempotency key.
    return lambda: shop.cancel_order(customer, "8042", "передумал", idempotency_key="act1")


async def handoff_failure_step(chat: Chat) -> Step:
    topics = TopicDirectory(chat.redis, keys=chat.keys, staff_chat_id=-1001)
    await topics.record_failure(KEY, "T0")
    return lambda: topics.record_failure(KEY, "T1")


async def signal_step(chat: Chat) -> Step:
    return lambda: chat.work.signal(KEY)


async def sweep_forget_step(chat: Chat) -> Step:
    await chat.work.signal(KEY)
    [entry] = await chat.work.stale(-60_000, 0, 10)
    return lambda: chat.work.forget(entry)


async def sweep_signal_again_step(chat: Chat) -> Step:
    await chat.work.ensure_group()
    await chat.intake.accept(chat.update(1))
    # The signal was read and acknowledged, the chat never drained: it is signalled again.
    reply: Any = await chat.redis.xreadgroup("workers", "careless", {chat.keys.work_stream: ">"})
    await chat.redis.xack(chat.keys.work_stream, "workers", reply[0][1][0][0])
    [entry] = await chat.work.stale(-60_000, 0, 10)
    runs: list[bool] = []

    async def step() -> Any:
        # The stream compares as the set of chats signalled: count the signals here.
        runs.append(await chat.work.signal_again(entry))
        assert runs in ([True], [True, False])
        return runs[-1]

    return step


async def sweep_look_step(chat: Chat) -> Step:
    await chat.queued(1)
    return lambda: chat.queue.waiting(KEY)


def _limited_intake(chat: Chat) -> Intake:
    """Intake with a queue cap of 2 and staff flood control (a burst of 1)."""
    return Intake(
        chat.redis,
        keys=chat.keys,
        work=chat.work,
        limits=FloodLimits(burst=5, interval_seconds=1.0, daily_turns=100),
        staff_limits=FloodLimits(burst=1, interval_seconds=60.0, daily_turns=0),
        queue_max=2,
        clock_ms=lambda: 1_796_300_000_000,
    )


async def intake_queue_full_step(chat: Chat) -> Step:
    intake = _limited_intake(chat)
    for update_id in (1, 2):
        await intake.accept(chat.update(update_id))
    # The third finds the queue full: its notice is queued and the fill marked.
    return lambda: intake.accept(chat.update(3))


async def intake_staff_step(chat: Chat) -> Step:
    intake = _limited_intake(chat)
    staff = StaffSender(staff_chat_id=-1001, user_id=555)
    await intake.accept(replace(chat.update(1), user_id=None, counts_turn=False, staff=staff))
    # Over the member's burst: the verdict is kept for the redelivery.
    return lambda: intake.accept(
        replace(chat.update(2), user_id=None, counts_turn=False, staff=staff)
    )


CASES: dict[str, Callable[[Chat], Awaitable[Step]]] = {
    "intake_queue_full": intake_queue_full_step,
    "intake_staff": intake_staff_step,
    "signal": signal_step,
    "sweep_forget": sweep_forget_step,
    "sweep_signal_again": sweep_signal_again_step,
    "sweep_look": sweep_look_step,
    "intake": intake_step,
    "take": take_step,
    "renew": renew_step,
    "complete": complete_step,
    "delivered": delivered_step,
    "delivered_last": delivered_last_step,
    "release_unrun": release_unrun_step,
    "session_commit": session_commit_step,
    "session_commit_answered": lambda chat: session_commit_step(chat, answered=True),
    "session_commit_handoff": lambda chat: session_commit_step(chat, handoff=True),
    "audit_write_once": audit_step,
    "handoff_failure": handoff_failure_step,
    "outbox_quarantine": quarantine_step,
    "note_failure": note_failure_step,
    "dead_letter": dead_letter_step,
    "shop_write": shop_write_step,
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_script_run_twice_leaves_the_state_of_one_run(
    redis_client: aioredis.Redis, case: str
) -> None:
    """Same arguments, same state; the repeat never fails where the first run succeeded."""
    chat = Chat(redis_client)
    step = await CASES[case](chat)
    before = await chat.snapshot()
    await step()
    once = await chat.snapshot()
    # renew only pushes the lease's expiry further, which the snapshot does not compare;
    # the sweep's look only reads; signalling a chat again adds a row the set folds.
    unseen = {"renew", "sweep_look", "sweep_signal_again"}
    assert once != before or case in unseen, "the first run changes something"
    await step()
    assert await chat.snapshot() == once
