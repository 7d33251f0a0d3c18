"""Every Redis script of the project, run twice with the same arguments, acts as one run.

redis-py re-sends a command after a connection error (``RetryPolicy`` in
bot/storage/connection.py), and Redis may have run the first send: each script
must be safe to repeat. Each case prepares a chat and runs the production call
that sends its script; the script under test is sent twice back to back, as a
lost reply makes it, and the caller gets the second reply. The case compares a
snapshot of every key (type, value, whether it expires) after the first and
the second run, the two replies (the same, or "done before" the caller treats
as done), and what the production call returned with what it returns when the
script runs once.

The script classes are found by walking :mod:`bot.storage.scripts` and every
subclass of :class:`~bot.storage.scripts.base.LuaScript`: a script without a
case here fails the suite.

A signal on the work stream may be sent twice: an extra signal is harmless (a
worker that finds nothing to do acknowledges it), so the stream is compared as
the set of conversations signalled, and the index of signalled chats beside it
as its members (a repeat scores the chat by its newer signal).
"""

import importlib
import pkgutil
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

import pytest
import redis.asyncio as aioredis

import bot.storage.scripts
from bot.analysis.schedule import AnalysisSchedule
from bot.audit.redis_sink import RedisStreamAuditSink
from bot.csat.schedule import CsatPolicy, CsatSchedule
from bot.csat.sweeper import RETRY_SECONDS
from bot.handoff.topics import TopicDirectory
from bot.queue.admission import FloodLimits, IncomingUpdate, Intake, IntakeVerdict, StaffSender
from bot.queue.chat_queue import ChatQueue, LeaseLostError
from bot.queue.dead_letters import REDRIVE_MARK_TTL_SECONDS, DeadLetter, DeadLetters
from bot.queue.delivery import Delivery
from bot.queue.delivery_steps import SendText
from bot.queue.work_stream import WorkStream
from bot.sessions.models import ConversationSession
from bot.sessions.redis_store import RedisSessionStore
from bot.sessions.store import JobCompletion
from bot.settings import DEMO_SHOP_DATA
from bot.storage.keys import RedisKeys
from bot.storage.scripts.admission_lua import Accept, StaffFlood
from bot.storage.scripts.analysis import BeginAnalysis
from bot.storage.scripts.audit import WriteOnce
from bot.storage.scripts.base import LuaScript, Scripts
from bot.storage.scripts.chat import (
    Acquire,
    Commit,
    Complete,
    Delivered,
    MoveAside,
    NoteFailure,
    QuarantineOutbox,
    Release,
    Renew,
    Take,
    Waiting,
)
from bot.storage.scripts.csat import Ask, ClaimDue, ForgetDue, RecordPress
from bot.storage.scripts.dead_letters import DropDeadLetter, RecordDeadLetter, Redrive
from bot.storage.scripts.handoff import Postpone, RecordFailure
from bot.storage.scripts.shop import ApplyShopWrite
from bot.storage.scripts.work import Forget, Resignal, SignalScript, Stale
from bot.tryout.demo_shop import RedisDemoShop
from tools.shop_backend import Customer
from tools.shop_data import ShopData

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

    def reply(self, job_id: str) -> Delivery:
        """A reply to ``job_id`` with its audit entry."""
        return Delivery(
            job_id=job_id,
            turn_id=f"T{job_id}",
            chat_id=77,
            steps=(SendText(text=f"ответ {job_id}", answer=True),),
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
    # Most of the lease gone: the renewal must push it back to a whole period (3 s).
    await chat.redis.pexpire(chat.keys.conversation(KEY).lease, 200)
    return lambda: chat.queue.renew(KEY, TOKEN)


async def renewed_to_a_whole_period(chat: Chat, renewed: Any) -> None:
    assert renewed is True
    assert await chat.redis.get(chat.keys.conversation(KEY).lease) == TOKEN.encode()
    assert await chat.redis.pttl(chat.keys.conversation(KEY).lease) > 2_000


async def one_job_and_the_lease_held(chat: Chat, waiting: Any) -> None:
    assert waiting == (1, True)


async def the_chat_is_stale(chat: Chat, entries: Any) -> None:
    assert [entry.conversation_key for entry in entries] == [KEY]


async def signalled_once_more(chat: Chat, signalled: Any) -> None:
    # The intake's signal and one more: the repeat found the index moved on and sent none.
    assert await chat.redis.xlen(chat.keys.work_stream) == 2


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


async def redrive_step(chat: Chat) -> Step:
    # The staff CLI's retry of a dead letter (synchronous there: the same call, sent here).
    await chat.queued(1)
    raw, job_id = await chat.head()
    call = Redrive(
        chat=chat.keys.conversation(KEY),
        turn_id="T1",
        job=raw,
        job_id=job_id,
        mark_ttl=REDRIVE_MARK_TTL_SECONDS,
    )
    return lambda: Scripts(chat.redis).run(call)


async def drop_dead_letter_step(chat: Chat) -> Step:
    # The staff CLI's drop (synchronous there: the same call, sent here).
    await (await dead_letter_step(chat))()
    call = DropDeadLetter(
        letters=chat.keys.dead_letters, order=chat.keys.dead_letter_order, turn_id="T1"
    )
    return lambda: Scripts(chat.redis).run(call)


async def shop_write_step(chat: Chat) -> Step:
    shop = RedisDemoShop(chat.redis, chat.keys, ShopData.load(DEMO_SHOP_DATA), clock=lambda: NOW)
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
    return lambda: chat.work.signal_again(entry)


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


async def acquire_step(chat: Chat) -> Step:
    # A session to read: the repeat must hand back the same version and data.
    locked = await chat.sessions.acquire(KEY, lease_seconds=3, wait_seconds=1)
    await chat.sessions.commit(locked, ConversationSession.start(KEY, NOW, "support_chat", "1.2.0"))

    async def step() -> Any:
        # The console and an action press take the lease this way; a repeat that answered
        # "held" would make them wait for their own lease, then give up.
        taken = await chat.sessions.acquire(KEY, lease_seconds=3, wait_seconds=0.2)
        return (taken.version, taken.session)

    return step


async def acquired_for_a_whole_period(chat: Chat, taken: Any) -> None:
    lease = chat.keys.conversation(KEY).lease
    assert await chat.redis.pttl(lease) > 2_000


async def move_aside_step(chat: Chat) -> Step:
    locked = await chat.sessions.acquire(KEY, lease_seconds=3, wait_seconds=1)
    session = ConversationSession.start(KEY, NOW, "support_chat", "1.2.0")
    await chat.sessions.commit(locked, session, release=False)
    locked = await chat.sessions.reload(KEY, locked.token)
    # /new: the session goes to its archive and the lease with it.
    return lambda: chat.sessions.archive(locked)


async def postpone_step(chat: Chat) -> Step:
    topics = TopicDirectory(chat.redis, keys=chat.keys, staff_chat_id=-1001)
    await topics.touch(KEY, 1_000)
    return lambda: topics.postpone(KEY, due_ms=1_000, until_ms=5_000)


def _schedule(chat: Chat, now: float = NOW.timestamp()) -> CsatSchedule:
    policy = CsatPolicy(after_idle_seconds=60, min_interval_seconds=3600)
    return CsatSchedule(chat.redis, keys=chat.keys, policy=policy, clock=lambda: now)


async def claim_due_step(chat: Chat) -> Step:
    await chat.redis.zadd(chat.keys.csat_due, {KEY: int(NOW.timestamp() * 1000) - 1})
    return lambda: _schedule(chat).claim(RETRY_SECONDS)


async def claimed_again_after_the_retry_delay(chat: Chat, outcome: Any) -> None:
    """A repeated claim answers nothing due; the chat is claimed by the next sweep after
    the retry delay, as after a sweeper that died between its claim and the queueing."""
    if outcome:
        return
    later = _schedule(chat, NOW.timestamp() + RETRY_SECONDS)
    assert [key for key, _ in await later.claim(RETRY_SECONDS)] == [KEY]


async def forget_due_step(chat: Chat) -> Step:
    await chat.redis.zadd(chat.keys.csat_due, {KEY: int(NOW.timestamp() * 1000) - 1})
    [(key, claimed_ms)] = await _schedule(chat).claim(RETRY_SECONDS)
    return lambda: _schedule(chat).forget(key, claimed_ms)


async def ask_step(chat: Chat) -> Step:
    await chat.redis.zadd(chat.keys.csat_due, {KEY: int(NOW.timestamp() * 1000) - 1})
    schedule = _schedule(chat)
    [(key, claimed_ms)] = await schedule.claim(RETRY_SECONDS)
    session = ConversationSession.start(KEY, NOW, "support_chat", "1.2.0").with_turn(
        "вопрос 1", "ответ 1", NOW, "1.2.0", turn_id="T1"
    )
    return lambda: schedule.decide(
        key, claimed_ms=claimed_ms, question_id="q1", session=session, blocked=False
    )


async def record_press_step(chat: Chat) -> Step:
    schedule = _schedule(chat)
    await chat.redis.zadd(chat.keys.csat_due, {KEY: int(NOW.timestamp() * 1000) - 1})
    [(key, claimed_ms)] = await schedule.claim(RETRY_SECONDS)
    asked = await schedule.decide(
        key, claimed_ms=claimed_ms, question_id="q1", session=None, blocked=False
    )
    assert asked is not None
    return lambda: schedule.record(KEY, "q1", 5, job_id="9")


async def begin_analysis_step(chat: Chat) -> Step:
    schedule = AnalysisSchedule(chat.redis, keys=chat.keys, idle_seconds=60, ttl_seconds=3600)
    session = ConversationSession.start(KEY, NOW, "support_chat", "1.2.0").with_turn(
        "вопрос 1", "ответ 1", NOW, "1.2.0", turn_id="T1"
    )
    # The sweeper's claim of this idle: a repeat must still say "yours".
    return lambda: schedule.begin(KEY, session, token="sweeper-1")


async def stale_step(chat: Chat) -> Step:
    await chat.work.signal(KEY)
    return lambda: chat.work.stale(-60_000, 0, 10)


def _same(first: Any, again: Any) -> bool:
    return bool(first == again)


def _done_before(first_answer: Any, repeat_answer: Any) -> Callable[[Any, Any], bool]:
    """The first run answers ``first_answer``, its repeat ``repeat_answer`` ("done before")."""

    def check(first: Any, again: Any) -> bool:
        return bool(_plain(first) == first_answer and _plain(again) == repeat_answer)

    return check


def _plain(reply: Any) -> Any:
    """A reply with bytes as text and lists as tuples (to compare with a literal)."""
    if isinstance(reply, bytes):
        return reply.decode()
    if isinstance(reply, list):
        return tuple(_plain(item) for item in reply)
    return reply


@dataclass(frozen=True, kw_only=True)
class Case:
    """One production call, the script it sends, and how a repeat may answer."""

    script: type[LuaScript]
    prepare: Callable[[Chat], Awaitable[Step]]
    # What the first run changes: the snapshot ("state"), nothing (a read-only script), or
    # what the snapshot folds ("hidden": a lease's expiry, one more signal), which ``check``
    # then proves.
    changes: Literal["state", "none", "hidden"] = "state"
    # Whether the repeat's reply is acceptable beside the first run's.
    replies: Callable[[Any, Any], bool] = _same
    # Why the caller treats a repeat's different reply as the first run's.
    why: str = ""
    # Whether the production call returns the same with the repeat as with one run.
    same_outcome: bool = True
    # What of the production call's result is compared (a time-stamped one: its stable part).
    outcome: Callable[[Any], Any] = lambda result: result
    # What must hold after the repeat, given what the production call returned.
    check: Callable[[Chat, Any], Awaitable[None]] | None = None


CASES: dict[str, Case] = {
    "intake": Case(
        script=Accept,
        prepare=intake_step,
        replies=lambda first, again: _plain(first)[0] == "ok" and _plain(again)[0] == "duplicate",
        why="a duplicate is an update accepted before; the signal flag is answered again",
        same_outcome=False,
    ),
    "intake_queue_full": Case(
        script=Accept,
        prepare=intake_queue_full_step,
        replies=lambda first, again: (
            _plain(first)[0] == "full_warn" and _plain(again)[0] == "duplicate"
        ),
        why="the notice was queued by the first run; a duplicate queues nothing more",
        same_outcome=False,
    ),
    "intake_staff": Case(script=StaffFlood, prepare=intake_staff_step),
    "signal": Case(
        script=SignalScript,
        prepare=signal_step,
        replies=lambda first, again: True,
        why="a second signal is harmless; the reply is not read",
    ),
    "stale": Case(
        script=Stale,
        prepare=stale_step,
        changes="none",
        outcome=lambda entries: [entry.conversation_key for entry in entries],
        check=the_chat_is_stale,
    ),
    "sweep_forget": Case(
        script=Forget, prepare=sweep_forget_step, replies=_done_before(1, 0), why="not read"
    ),
    "sweep_signal_again": Case(
        script=Resignal,
        prepare=sweep_signal_again_step,
        replies=_done_before(1, 0),
        why="the sweep only counts it (signalled or live); the chat was signalled",
        same_outcome=False,
        changes="hidden",
        check=signalled_once_more,
    ),
    "sweep_look": Case(
        script=Waiting, prepare=sweep_look_step, changes="none", check=one_job_and_the_lease_held
    ),
    "take": Case(script=Take, prepare=take_step),
    "renew": Case(
        script=Renew, prepare=renew_step, changes="hidden", check=renewed_to_a_whole_period
    ),
    "acquire": Case(
        script=Acquire,
        prepare=acquire_step,
        outcome=lambda taken: (taken[0], taken[1].conversation_key, taken[1].turn_count),
        check=acquired_for_a_whole_period,
    ),
    "move_aside": Case(script=MoveAside, prepare=move_aside_step),
    "complete": Case(
        script=Complete,
        prepare=complete_step,
        replies=_done_before(1, 2),
        why="2 says the outbox holds the reply: the worker delivers the outbox's entry",
        same_outcome=False,
    ),
    "delivered": Case(script=Delivered, prepare=delivered_step),
    "delivered_last": Case(script=Delivered, prepare=delivered_last_step),
    "release_unrun": Case(
        script=Release, prepare=release_unrun_step, replies=_done_before(1, 0), why="not read"
    ),
    "session_commit": Case(
        script=Commit,
        prepare=session_commit_step,
        replies=_done_before(1, 2),
        why="2 is 'saved before': commit succeeds",
    ),
    "session_commit_answered": Case(
        script=Commit,
        prepare=lambda chat: session_commit_step(chat, answered=True),
        replies=_done_before(1, 2),
        why="2 is 'saved before': commit succeeds",
    ),
    "session_commit_handoff": Case(
        script=Commit,
        prepare=lambda chat: session_commit_step(chat, handoff=True),
        replies=_done_before(1, 2),
        why="2 is 'saved before': commit succeeds",
    ),
    "audit_write_once": Case(
        script=WriteOnce,
        prepare=audit_step,
        replies=_done_before(1, 0),
        why="0 is 'written before': the sink counts it written",
    ),
    "handoff_failure": Case(script=RecordFailure, prepare=handoff_failure_step),
    "postpone": Case(script=Postpone, prepare=postpone_step),
    "outbox_quarantine": Case(script=QuarantineOutbox, prepare=quarantine_step),
    "note_failure": Case(script=NoteFailure, prepare=note_failure_step),
    "dead_letter": Case(
        script=RecordDeadLetter,
        prepare=dead_letter_step,
        replies=_done_before(1, 0),
        why="0 is 'recorded before': the caller goes on as recorded",
        same_outcome=False,
    ),
    "shop_write": Case(script=ApplyShopWrite, prepare=shop_write_step),
    "redrive": Case(
        script=Redrive,
        prepare=redrive_step,
        replies=_done_before(1, 0),
        why="0 is 'queued before': the retry says so, and signals the chat either way",
        same_outcome=False,
    ),
    "drop_dead_letter": Case(
        script=DropDeadLetter,
        prepare=drop_dead_letter_step,
        replies=_done_before(1, 0),
        why="0 is 'no such letter': the letter is gone, as the first run left it",
        same_outcome=False,
    ),
    "csat_claim_due": Case(
        script=ClaimDue,
        prepare=claim_due_step,
        replies=lambda first, again: len(first) == 2 and len(again) == 1,
        why="nothing is due after the first run moved the score one retry delay on",
        same_outcome=False,
        check=claimed_again_after_the_retry_delay,
    ),
    "csat_forget_due": Case(
        script=ForgetDue, prepare=forget_due_step, replies=_done_before(1, 0), why="not read"
    ),
    "csat_ask": Case(
        script=Ask,
        prepare=ask_step,
        replies=lambda first, again: (
            _plain(first)[0] == "ask" and _plain(again) == ("again", *_plain(first)[1:])
        ),
        why="'again' is the same question asked: decide asks it",
    ),
    "csat_record_press": Case(script=RecordPress, prepare=record_press_step),
    "begin_analysis": Case(script=BeginAnalysis, prepare=begin_analysis_step),
}


def every_script_class() -> set[type[LuaScript]]:
    """Every script of the project: the modules of bot/storage/scripts, and any subclass."""
    for module in pkgutil.iter_modules(bot.storage.scripts.__path__):
        importlib.import_module(f"{bot.storage.scripts.__name__}.{module.name}")
    found: set[type[LuaScript]] = set()
    pending = list(LuaScript.__subclasses__())
    while pending:
        script = pending.pop()
        pending.extend(script.__subclasses__())
        # ``@dataclass(slots=True)`` replaces the class it decorates: the class a module
        # names is the script; the one it replaced lingers among the subclasses.
        if getattr(sys.modules[script.__module__], script.__qualname__, None) is script:
            found.add(script)
    return found


def test_every_script_has_a_case() -> None:
    """A script added without a case here fails: the claim is about every one."""
    scripts = every_script_class()
    assert len(scripts) >= 29
    missing = sorted(script.__name__ for script in scripts - {c.script for c in CASES.values()})
    assert missing == [], f"scripts with no repeat case: {missing}"


class Repeating:
    """``Scripts.run`` as a lost reply makes it: the target is sent twice, back to back.

    The caller gets the second reply, as it does when redis-py re-sends the script.
    """

    def __init__(self, chat: Chat, target: type[LuaScript] | None) -> None:
        self.chat = chat
        self.target = target
        self.replies: list[Any] = []
        self.states: list[dict[str, Any]] = []

    def patch(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Route every script of this test through :meth:`run`."""
        sent = Scripts.run
        repeating = self

        async def run(scripts: Scripts, call: LuaScript) -> Any:
            if type(call) is not repeating.target or repeating.replies:
                return await sent(scripts, call)
            repeating.states.append(await repeating.chat.snapshot())
            for _ in range(2):
                repeating.replies.append(await sent(scripts, call))
                repeating.states.append(await repeating.chat.snapshot())
            return repeating.replies[-1]

        monkeypatch.setattr(Scripts, "run", run)


@pytest.mark.parametrize("case", list(CASES))
async def test_a_script_run_twice_leaves_the_state_of_one_run(
    redis_client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Same arguments, same state; the repeat answers as the first run did, or "done before"."""
    spec = CASES[case]
    once = Chat(redis_client)
    step = await spec.prepare(once)
    single = Repeating(once, None)
    single.patch(monkeypatch)
    outcome_once = await step()

    await redis_client.flushdb()
    chat = Chat(redis_client)
    step = await spec.prepare(chat)
    repeating = Repeating(chat, spec.script)
    repeating.patch(monkeypatch)
    outcome_twice = await step()

    assert len(repeating.replies) == 2, f"the call never sent {spec.script.__name__}"
    before, after_one, after_two = repeating.states
    if spec.changes == "state":
        assert after_one != before, "the first run changes something"
    elif spec.changes == "none":
        assert after_one == before, "a read-only script changed something"
    else:
        assert spec.check is not None, "a change the snapshot folds needs a check"
    assert after_two == after_one, "the repeat changed the state"
    first, again = repeating.replies
    assert spec.replies(first, again), f"replies {first!r}, then {again!r}"
    if spec.same_outcome:
        assert spec.outcome(outcome_twice) == spec.outcome(outcome_once)
    else:
        assert spec.why
    if spec.check is not None:
        await spec.check(chat, outcome_twice)
