"""Undeliverable replies, and the lease a heartbeat keeps (or loses) while a turn runs.

Leases are 3 s here (see :mod:`tests.durability.support`).
"""

import asyncio
import time
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from bot.engine.history import UNDELIVERED_NOTE
from bot.queue.work_stream import GROUP
from bot.storage.keys import RedisKeys, telegram_conversation
from bot.testing.openai_server import Reply, ScriptedOpenAIServer
from bot.testing.telegram_server import FakeTelegramServer
from tests.durability.support import (
    CLAIM_INTERVAL_SECONDS,
    LEASE_SECONDS,
    PREFIX,
    Cluster,
    answer_for,
    asks,
    audit_turns,
    echo,
    post_update,
    stored_session,
    wait_until,
)

pytestmark = pytest.mark.timeout(180)

CHAT = 9090
FIRST = "где мой заказ 8041?"
SECOND = "вы получили мой вопрос?"


async def test_a_reply_refused_with_403_is_recorded_undelivered(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
) -> None:
    """History and audit say so, and the next turn's model request is told so."""
    model.responder = echo
    telegram.fail_next("sendMessage", 403, "Forbidden: bot was blocked by the user")
    poller = await cluster.start("polling", "poller")
    await telegram.push_message(CHAT, FIRST)
    await wait_until(
        lambda: any(not call.ok for call in telegram.calls_of("sendMessage")),
        30,
        "the send is refused",
        cluster.logs,
    )
    await wait_until(lambda: bool(poller.log().count("not delivered")), 10, "logged", poller.log)
    # The 403 marked the chat blocked: nothing is sent until the customer unblocks the bot.
    await telegram.push(telegram.member_update(CHAT, "kicked", "member"))
    await telegram.push_message(CHAT, SECOND)
    await telegram.wait_for_texts(CHAT, 1, within=30)

    session = await stored_session(store, CHAT)
    assert [(m.role, m.content, m.undelivered) for m in session.messages] == [
        ("user", FIRST, False),
        ("assistant", answer_for(FIRST), True),
        ("user", SECOND, False),
        ("assistant", answer_for(SECOND), False),
    ]
    # A turn's audit is written just after its send: seeing the text does not mean it is in.
    for _ in range(200):
        turns = await audit_turns(store)
        if len(turns) >= 2:
            break
        await asyncio.sleep(0.05)
    assert [turn["outcome"] for turn in turns] == ["undelivered", "answered"]
    shown = model.requests[1].messages
    assert any(
        m["role"] == "assistant" and str(m["content"]).startswith(UNDELIVERED_NOTE) for m in shown
    ), shown
    assert telegram.sent_texts(CHAT) == [answer_for(SECOND)]
    log = poller.log()
    assert "Traceback" not in log
    assert log.count("not delivered") == 1


async def test_a_turn_longer_than_the_lease_keeps_it(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
) -> None:
    """The heartbeat renews the lease: another worker never takes the chat over.

    The model answers once the turn has outlived its lease (see :func:`outlived_its_lease`).
    """
    lease = RedisKeys(PREFIX).conversation(telegram_conversation(CHAT)).lease
    holders: list[tuple[bytes | str | None, bytes | str | None]] = []

    async def slow(body: Any) -> Reply:
        started = time.monotonic()
        # The turn's worker holds the lease while it asks the model.
        taken = await store.get(lease)
        kept = await outlived_its_lease(store, started, within=60)
        holders.append((taken, kept))
        return echo(body)

    model.responder = slow
    await asyncio.gather(cluster.start("polling", "poller"), cluster.start("worker", "worker"))
    await telegram.push_message(CHAT, FIRST)
    await telegram.wait_for_texts(CHAT, 1, within=90)
    [(taken, kept)] = holders
    # Past a lease's length the same token still holds the chat: only renewals keep it.
    assert taken is not None
    assert kept == taken, "the lease changed hands during the turn"
    # A takeover would have asked the model again (and holds the chat until it answers):
    # the chat is seen released, and every process stopped, before counting.
    await cluster.finish(store, [CHAT], turns=1)
    assert telegram.sent_texts(CHAT) == [answer_for(FIRST)]
    assert len(model.requests) == 1, "no takeover: the turn ran once"
    assert "lost" not in cluster.logs()
    assert [turn["outcome"] for turn in await audit_turns(store)] == ["answered"]


async def outlived_its_lease(
    store: aioredis.Redis, started: float, *, within: float
) -> bytes | str | None:
    """Wait until the turn begun at ``started`` has held its chat longer than a lease.

    That is: more than a lease has passed, the lease is still there, and a claim
    round has found the chat's signal idle for a lease and taken it (the turn's own
    worker leaves it pending; any other would be refused). Returns the lease's
    token then, for the caller to compare with the one the turn started under.
    """
    keys = RedisKeys(PREFIX)
    lease = keys.conversation(telegram_conversation(CHAT)).lease
    async with asyncio.timeout(within):
        while True:
            pending = await store.xpending_range(
                keys.work_stream, GROUP, min="-", max="+", count=10
            )
            reclaimed = any(int(entry["times_delivered"]) >= 2 for entry in pending)
            if (
                reclaimed
                and time.monotonic() - started > LEASE_SECONDS
                and (holder := await store.get(lease)) is not None
            ):
                return holder
            await asyncio.sleep(0.05)


async def test_a_worker_whose_heartbeat_stops_loses_the_chat_and_its_late_commit(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
) -> None:
    """SIGSTOP freezes a worker mid-turn: another takes over; the frozen one commits nothing."""
    release_first = asyncio.Event()
    first_answer_ready = asyncio.Event()
    answered_first = False

    async def first_waits(body: Any) -> Reply:
        nonlocal answered_first
        if asks(body, FIRST) and not answered_first:
            answered_first = True
            await release_first.wait()
            first_answer_ready.set()
        return echo(body)

    model.responder = first_waits
    hook = await cluster.start("webhook", "frozen")
    async with aiohttp.ClientSession() as http:
        assert await post_update(http, hook, telegram.message_update(CHAT, FIRST)) == 200
        await wait_until(lambda: len(model.requests) == 1, 30, "the model is asked", cluster.logs)
        # The only process so far runs the turn; the other one starts now.
        await cluster.start("worker", "taker")
        hook.pause()
        try:
            paused = time.monotonic()
            await telegram.wait_for_texts(
                CHAT, 1, within=2 * LEASE_SECONDS + CLAIM_INTERVAL_SECONDS + 15
            )
            print(f"taken over {time.monotonic() - paused:.1f} s after the heartbeat stopped")
            # The frozen worker's model answer is on its way before it wakes up.
            release_first.set()
            async with asyncio.timeout(10):
                await first_answer_ready.wait()
        finally:
            hook.resume()
        await wait_until(
            lambda: "lost" in hook.log(), 30, "the frozen worker sees its lease lost", hook.log
        )
        assert await post_update(http, hook, telegram.message_update(CHAT, SECOND)) == 200
        await wait_until(
            lambda: len(telegram.sent_texts(CHAT)) >= 2, 30, "the second answer", cluster.logs
        )
        # A late send of the frozen worker, or anything left queued, arrives before counting.
        await cluster.finish(store, [CHAT], turns=2)

    assert telegram.sent_texts(CHAT) == [answer_for(FIRST), answer_for(SECOND)], cluster.logs()
    session = await stored_session(store, CHAT)
    assert [(m.role, m.content) for m in session.messages] == [
        ("user", FIRST),
        ("assistant", answer_for(FIRST)),
        ("user", SECOND),
        ("assistant", answer_for(SECOND)),
    ]
    turns = await audit_turns(store)
    assert [turn["outcome"] for turn in turns] == ["answered", "answered"]
    assert "Traceback" not in cluster.logs()
