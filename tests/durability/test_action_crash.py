"""SIGKILL of a real bot process after a confirmed action's handler, before its commit.

The press stays queued; the next process re-runs the handler with the same
idempotency key (the action id): the shop answers the first receipt, so the
order changes once, the card is edited once and the customer told once. That
holds when the restart comes after the confirmation window (the press is
judged by when it arrived), and when the press is given up as a dead letter
(the shop is asked by the action's key; the card and pending action close).
"""

import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.actions.presses import DEFAULT_CARD_WINDOW_SECONDS
from bot.storage.keys import RedisKeys
from bot.testing.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    text_answer,
    tool_call_answer,
    user_texts,
)
from bot.testing.telegram_server import FakeTelegramServer
from tests.durability.support import (
    CLAIM_INTERVAL_SECONDS,
    LEASE_SECONDS,
    PREFIX,
    STREAM,
    Cluster,
    stored_session,
    wait_until,
)

pytestmark = pytest.mark.timeout(180)

CHAT = 5151
TAKEOVER_WITHIN = 2 * LEASE_SECONDS + CLAIM_INTERVAL_SECONDS + 15
OUTCOME = "Заказ 8042 отменён. Деньги вернутся на карту в течение 5 дней."


def proposing(body: Any) -> Reply:
    """Asks for cancel_order on the customer's request; after the tool, asks to press."""
    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        return text_answer("Нажмите «Подтвердить» на карточке.")
    if user_texts(body)[-1:] == ["отмените заказ 8042"]:
        return tool_call_answer("cancel_order", {"order_id": "8042", "reason": "передумал"})
    return text_answer("ответ")


async def test_sigkill_between_the_handler_and_the_commit_changes_the_order_once(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
) -> None:
    model.responder = proposing
    first = await cluster.start("polling", "first", BOT_CRASH_POINT="action_handled")
    await telegram.push_message(CHAT, "отмените заказ 8042")
    await telegram.wait_for(lambda: bool(telegram.keyboards(CHAT)), within=30)
    [(card_id, _, keyboard)] = telegram.keyboards(CHAT)
    yes = keyboard[0][0]["callback_data"]
    action_id = yes.split(":")[1]

    await telegram.push(telegram.callback_update(CHAT, card_id, yes))
    await wait_until(lambda: not first.alive, 30, "the crash point kills it", cluster.logs)

    # Killed after the handler (its receipt is stored) and before the commit.
    keys = RedisKeys(PREFIX)
    customer = f"u{CHAT}"
    assert await store.exists(keys.shop_done(customer, action_id)) == 1
    session = await stored_session(store, CHAT)
    assert session.pending_action is not None
    assert session.pending_action.action_id == action_id
    assert telegram.calls_of("editMessageText") == []

    await cluster.start("polling", "restarted")
    await telegram.wait_for(lambda: OUTCOME in telegram.sent_texts(CHAT), within=TAKEOVER_WITHIN)
    await cluster.finish(store, [CHAT], turns=1)

    edits = [call.params for call in telegram.calls_of("editMessageText") if call.ok]
    assert [(edit["message_id"], edit["text"]) for edit in edits] == [
        (card_id, "✅ Заказ 8042 отменён")
    ], cluster.logs()
    assert telegram.sent_texts(CHAT).count(OUTCOME) == 1
    stored = await store.hget(keys.shop_orders(customer), "8042")
    assert stored is not None
    assert b'"status":"cancelled"' in stored
    session = await stored_session(store, CHAT)
    assert session.pending_action is None
    assert [m.action_id for m in session.messages if m.action_id] == [action_id]
    entries = await store.xrange(STREAM) or []
    steps = [
        fields.get(b"event")
        for _, fields in entries
        if fields is not None and fields.get(b"type") == b"action"
    ]
    assert steps == [b"proposed", b"confirmed", b"executed"]
    assert "Traceback" not in cluster.logs()


# Long enough for a loaded machine to take the press in after its card was shown.
CONFIRM_SECONDS = 6.0


@pytest.mark.parametrize(
    "env",
    [
        # Restarted after the window: the press is judged by when it arrived.
        {"ACTION_CONFIRM_SECONDS": str(CONFIRM_SECONDS)},
        # The press is given up (one attempt allowed): the shop is asked by the key.
        {"JOB_MAX_ATTEMPTS": "1"},
    ],
    ids=["restart_after_the_window", "dead_letter"],
)
async def test_an_action_applied_before_the_crash_is_told_as_executed(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
    env: dict[str, str],
) -> None:
    model.responder = proposing
    first = await cluster.start("polling", "first", BOT_CRASH_POINT="action_handled", **env)
    await telegram.push_message(CHAT, "отмените заказ 8042")
    await telegram.wait_for(lambda: bool(telegram.keyboards(CHAT)), within=30)
    shown = time.time()  # the proposal was made before its card was shown
    [(card_id, _, keyboard)] = telegram.keyboards(CHAT)
    yes = keyboard[0][0]["callback_data"]
    action_id = yes.split(":")[1]
    await telegram.push(telegram.callback_update(CHAT, card_id, yes))
    await wait_until(lambda: not first.alive, 30, "the crash point kills it", cluster.logs)
    keys = RedisKeys(PREFIX)
    assert await store.exists(keys.shop_done(f"u{CHAT}", action_id)) == 1
    if "ACTION_CONFIRM_SECONDS" in env:
        # The restarted process gets to the press when, by its clock, the window is over.
        await wait_until(
            lambda: time.time() > shown + CONFIRM_SECONDS, 20, "the window is over", cluster.logs
        )

    await cluster.start("polling", "restarted", **env)
    await telegram.wait_for(lambda: OUTCOME in telegram.sent_texts(CHAT), within=TAKEOVER_WITHIN)
    await cluster.finish(store, [CHAT], turns=1)

    edits = [call.params for call in telegram.calls_of("editMessageText") if call.ok]
    assert [(edit["message_id"], edit["text"]) for edit in edits] == [
        (card_id, "✅ Заказ 8042 отменён")
    ], cluster.logs()
    texts = telegram.sent_texts(CHAT)
    assert texts.count(OUTCOME) == 1
    assert not any("истёк" in text or "Код обращения" in text for text in texts), texts
    session = await stored_session(store, CHAT)
    assert session.pending_action is None
    [told] = [m for m in session.messages if m.action_id]
    assert told.action_id == action_id
    assert "отменён" in told.content
    entries = await store.xrange(STREAM) or []
    rows = [fields for _, fields in entries if fields is not None]
    steps = [row.get(b"event") for row in rows if row.get(b"type") == b"action"]
    assert steps == [b"proposed", b"confirmed", b"executed"]
    # The press arrived in time (by the intake's record, which the verdict used), however
    # long the crash and the restart took on this machine.
    [confirmed] = [row for row in rows if row.get(b"event") == b"confirmed"]
    window = float(env.get("ACTION_CONFIRM_SECONDS", DEFAULT_CARD_WINDOW_SECONDS))
    assert float(confirmed[b"decide_ms"]) < window * 1000
    # The one failed entry a given-up job leaves would tell another story.
    assert not [row for row in rows if row.get(b"outcome") == b"failed"]
    assert "Traceback" not in cluster.logs()
