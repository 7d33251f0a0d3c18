"""SIGKILL of a real bot process mid-turn: the accepted message is still answered, once.

Leases are 3 s here (see :mod:`tests.durability.support`); "about one lease
plus the claim interval" is then a few seconds, against the minutes a chat
stayed blocked before the queue existed.
"""

import time
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from bot.testing.openai_server import Reply, ScriptedOpenAIServer, hang
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

CHAT = 4242
FIRST = "где мой заказ 8041?"
SECOND = "а когда вы работаете?"
# A takeover waits for the dead worker's lease to expire and its signal to be idle for
# one lease, then for the next claim round; on top comes a busy 2-core machine.
TAKEOVER_WITHIN = 2 * LEASE_SECONDS + CLAIM_INTERVAL_SECONDS + 15


def hang_on_first(question: str) -> Any:
    """A model that never answers the first request asking ``question``, then echoes."""
    hung = False

    def respond(body: Any) -> Reply:
        nonlocal hung
        if asks(body, question) and not hung:
            hung = True
            return hang(120)
        return echo(body)

    return respond


async def assert_answered_once_then_normal(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
    send_second: Any,
) -> None:
    await telegram.wait_for_texts(CHAT, 1, within=TAKEOVER_WITHIN)
    await send_second()
    await telegram.wait_for_texts(CHAT, 2, within=30)
    # Whatever could still be sent (a queued job, an outbox entry) is, before counting.
    await cluster.finish(store, [CHAT], turns=2)
    assert telegram.sent_texts(CHAT) == [answer_for(FIRST), answer_for(SECOND)], cluster.logs()
    # The hung request, its re-run after the crash, the second message.
    assert [asks(r.body, FIRST) for r in model.requests] == [True, True, False]
    session = await stored_session(store, CHAT)
    assert [(m.role, m.content) for m in session.messages] == [
        ("user", FIRST),
        ("assistant", answer_for(FIRST)),
        ("user", SECOND),
        ("assistant", answer_for(SECOND)),
    ]
    turns = [t for t in await audit_turns(store) if t["chat_id"] == str(CHAT)]
    assert [t["outcome"] for t in turns] == ["answered", "answered"]
    assert len({t["turn_id"] for t in turns}) == 2
    assert "Traceback" not in cluster.logs()


async def test_sigkill_while_waiting_on_the_model_in_polling_mode(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
) -> None:
    """The turn re-runs after a restart: one answer, then the next message as usual."""
    model.responder = hang_on_first(FIRST)
    first = await cluster.start("polling", "first")
    await telegram.push_message(CHAT, FIRST)
    await wait_until(lambda: len(model.requests) == 1, 30, "the model is asked", cluster.logs)
    await first.sigkill()

    await cluster.start("polling", "restarted")
    started = time.monotonic()
    await telegram.wait_for_texts(CHAT, 1, within=TAKEOVER_WITHIN)
    print(f"polling: answered {time.monotonic() - started:.1f} s after the restart was ready")

    async def send_second() -> None:
        await telegram.push_message(CHAT, SECOND)

    await assert_answered_once_then_normal(cluster, telegram, model, store, send_second)


async def test_sigkill_while_waiting_on_the_model_in_webhook_mode(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
) -> None:
    """Answered 200 means kept: the restarted process answers it, once."""
    model.responder = hang_on_first(FIRST)
    first = await cluster.start("webhook", "first")
    async with aiohttp.ClientSession() as http:
        assert await post_update(http, first, telegram.message_update(CHAT, FIRST)) == 200
        await wait_until(lambda: len(model.requests) == 1, 30, "the model is asked", cluster.logs)
        await first.sigkill()

        restarted = await cluster.start("webhook", "restarted")
        started = time.monotonic()
        await telegram.wait_for_texts(CHAT, 1, within=TAKEOVER_WITHIN)
        print(f"webhook: answered {time.monotonic() - started:.1f} s after the restart was ready")

        async def send_second() -> None:
            update = telegram.message_update(CHAT, SECOND)
            assert await post_update(http, restarted, update) == 200

        await assert_answered_once_then_normal(cluster, telegram, model, store, send_second)


async def test_sigkill_after_the_commit_before_the_send_sends_the_reply_once(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
) -> None:
    """The committed reply waits in the outbox; the next worker sends it without a re-run."""
    model.responder = echo
    telegram.hold_sends(CHAT)
    first = await cluster.start("polling", "first")
    await telegram.push_message(CHAT, FIRST)
    await wait_until(lambda: telegram.holding == 1, 30, "the send is held", cluster.logs)
    outbox = await store.hgetall(f"{PREFIX}:{{tg:{CHAT}}}:outbox")
    assert len(outbox) == 1, "the reply is committed to the outbox before it is sent"
    await first.sigkill()
    await wait_until(lambda: telegram.holding == 0, 10, "the held send is dropped", cluster.logs)
    await telegram.release_sends(CHAT)
    assert len(telegram.discarded) == 1
    assert telegram.sent_texts(CHAT) == []

    await cluster.start("polling", "restarted")
    await telegram.wait_for_texts(CHAT, 1, within=TAKEOVER_WITHIN)
    await cluster.finish(store, [CHAT], turns=1)
    assert telegram.sent_texts(CHAT) == [answer_for(FIRST)], cluster.logs()
    assert len(model.requests) == 1, "the committed turn did not run again"
    assert await store.hlen(f"{PREFIX}:{{tg:{CHAT}}}:outbox") == 0
    session = await stored_session(store, CHAT)
    assert [(m.role, m.content, m.undelivered) for m in session.messages] == [
        ("user", FIRST, False),
        ("assistant", answer_for(FIRST), False),
    ]
    turns = [t for t in await audit_turns(store) if t["chat_id"] == str(CHAT)]
    assert [t["outcome"] for t in turns] == ["answered"]
