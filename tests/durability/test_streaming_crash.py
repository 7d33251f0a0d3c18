"""SIGKILL of a real bot process while its answer streams into a draft: one answer after recovery.

The draft the customer saw expires by itself (Telegram keeps a draft about 30 s);
nothing of the cut stream was committed, so the recovered turn runs again and
its answer is sent once, as a message.
"""

import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.testing.openai_server import Reply, ScriptedOpenAIServer, text_answer, trickle
from bot.testing.telegram_server import FakeTelegramServer
from tests.durability.support import (
    CLAIM_INTERVAL_SECONDS,
    LEASE_SECONDS,
    Cluster,
    answer_for,
    asks,
    audit_turns,
    echo,
    stored_session,
    wait_until,
)

pytestmark = pytest.mark.timeout(180)

CHAT = 4343
QUESTION = "где мой заказ 8041?"
TAKEOVER_WITHIN = 2 * LEASE_SECONDS + CLAIM_INTERVAL_SECONDS + 15


def slow_stream_first(question: str) -> Any:
    """The first answer to ``question`` trickles (2 characters a second), later ones are quick."""
    slow = True

    def respond(body: Any) -> Reply:
        nonlocal slow
        if asks(body, question) and slow:
            slow = False
            return trickle(text_answer(answer_for(question)), chunk_chars=2, interval_seconds=1.0)
        return echo(body)

    return respond


async def test_sigkill_mid_stream_answers_once_after_recovery(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
) -> None:
    model.responder = slow_stream_first(QUESTION)
    first = await cluster.start("polling", "first", STREAM_DRAFT_INTERVAL_SECONDS="0.1")
    await telegram.push_message(CHAT, QUESTION)
    # The customer sees the answer being written...
    await wait_until(
        lambda: any(call.params.get("text") for call in telegram.drafts(CHAT)),
        30,
        "a draft with text",
        cluster.logs,
    )
    await first.sigkill()
    partial = [str(call.params.get("text", "")) for call in telegram.drafts(CHAT)]
    assert all(answer_for(QUESTION).startswith(text) for text in partial)
    assert answer_for(QUESTION) not in partial

    await cluster.start("polling", "restarted")
    started = time.monotonic()
    await telegram.wait_for_texts(CHAT, 1, within=TAKEOVER_WITHIN)
    print(f"answered {time.monotonic() - started:.1f} s after the restart was ready")
    await cluster.finish(store, [CHAT], turns=1)

    # ...and then gets it once, as a message; the history holds it once.
    assert telegram.sent_texts(CHAT) == [answer_for(QUESTION)], cluster.logs()
    assert [asks(r.body, QUESTION) for r in model.requests] == [True, True]
    session = await stored_session(store, CHAT)
    assert [(m.role, m.content) for m in session.messages] == [
        ("user", QUESTION),
        ("assistant", answer_for(QUESTION)),
    ]
    turns = [t for t in await audit_turns(store) if t["chat_id"] == str(CHAT)]
    assert [t["outcome"] for t in turns] == ["answered"]
    assert "Traceback" not in cluster.logs()
