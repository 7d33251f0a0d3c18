"""SIGKILL of a real bot process after a shop's MCP server received a confirmed call.

The process dies after the server answered and before the outcome was committed;
the press stays queued. The next process finds the action marked as executing
and does not call the server again: the server counted one call, the customer is
told the outcome is being checked, and staff see the action as a dead letter.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis import Redis as SyncRedis

from bot.customer_texts import ACTION_CHECKING_MESSAGE, ACTION_CHECKING_TEXT, ACTION_FAILED_TEXT
from bot.queue.dead_letters import read_dead_letters
from bot.storage.keys import RedisKeys
from bot.testing.mcp_process import McpServerProcess
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

CHAT = 5353
TAKEOVER_WITHIN = 2 * LEASE_SECONDS + CLAIM_INTERVAL_SECONDS + 15


def proposing(body: Any) -> Reply:
    """Asks for the shop's cancel_order on the customer's request; then asks to press."""
    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        return text_answer("Нажмите «Подтвердить» на карточке.")
    if user_texts(body)[-1:] == ["отмените заказ 8042"]:
        return tool_call_answer("cancel_order", {"order_id": "8042", "reason": "передумал"})
    return text_answer("ответ")


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[McpServerProcess]:
    server = McpServerProcess(tmp_path / "calls.jsonl")
    server.start()
    yield server
    server.kill()


async def test_sigkill_after_the_shop_received_the_call_never_calls_it_again(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
    shop: McpServerProcess,
) -> None:
    model.responder = proposing
    cluster.env["MCP_SERVERS"] = json.dumps(
        [{"name": "shop", "url": shop.url, "tools": ["get_order", "cancel_order"]}]
    )
    first = await cluster.start("polling", "first", BOT_CRASH_POINT="action_handled")
    await telegram.push_message(CHAT, "отмените заказ 8042")
    await telegram.wait_for(lambda: bool(telegram.keyboards(CHAT)), within=30)
    [(card_id, card_text, keyboard)] = telegram.keyboards(CHAT)
    assert "order_id: «8042»" in card_text
    yes = keyboard[0][0]["callback_data"]
    action_id = yes.split(":")[1]

    await telegram.push(telegram.callback_update(CHAT, card_id, yes))
    await wait_until(lambda: not first.alive, 30, "the crash point kills it", cluster.logs)

    # The shop ran the call; the outcome was never committed.
    assert len(shop.calls("cancel_order")) == 1
    session = await stored_session(store, CHAT)
    assert session.pending_action is not None
    assert session.pending_action.action_id == action_id

    await cluster.start("polling", "restarted")
    await telegram.wait_for(
        lambda: ACTION_CHECKING_MESSAGE in telegram.sent_texts(CHAT), within=TAKEOVER_WITHIN
    )
    await cluster.finish(store, [CHAT], turns=1)

    assert len(shop.calls("cancel_order")) == 1, cluster.logs()
    edits = [call.params for call in telegram.calls_of("editMessageText") if call.ok]
    assert [(edit["message_id"], edit["text"]) for edit in edits] == [
        (card_id, ACTION_CHECKING_TEXT)
    ]
    client = SyncRedis.from_url(cluster.redis_url)
    try:
        letters = read_dead_letters(client, RedisKeys(PREFIX), 10)
    finally:
        client.close()
    assert [(letter.kind, letter.action_id, letter.server) for letter in letters] == [
        ("action", action_id, "shop")
    ]
    assert "Traceback" not in cluster.logs()


async def test_a_run_that_reached_the_shop_is_being_checked_while_the_shop_is_still_down(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
    shop: McpServerProcess,
) -> None:
    """The bot dies after the shop applied the call and restarts while the shop is down.

    Its tools are not listed then; the executing mark alone says the call may have run:
    the customer reads "being checked", never "nothing changed", and staff get the
    action as a dead letter naming its server.
    """
    model.responder = proposing
    cluster.env["MCP_SERVERS"] = json.dumps(
        [{"name": "shop", "url": shop.url, "tools": ["get_order", "cancel_order"]}]
    )
    cluster.env["MCP_CONNECT_TIMEOUT_SECONDS"] = "1"
    first = await cluster.start("polling", "first", BOT_CRASH_POINT="action_handled")
    await telegram.push_message(CHAT, "отмените заказ 8042")
    await telegram.wait_for(lambda: bool(telegram.keyboards(CHAT)), within=30)
    [(card_id, _, keyboard)] = telegram.keyboards(CHAT)
    yes = keyboard[0][0]["callback_data"]
    action_id = yes.split(":")[1]
    await telegram.push(telegram.callback_update(CHAT, card_id, yes))
    await wait_until(lambda: not first.alive, 30, "the crash point kills it", cluster.logs)
    assert len(shop.calls("cancel_order")) == 1
    shop.kill()  # the shop stays down while the bot comes back

    restarted = await cluster.start("polling", "restarted")
    await telegram.wait_for(
        lambda: ACTION_CHECKING_MESSAGE in telegram.sent_texts(CHAT), within=TAKEOVER_WITHIN
    )
    await cluster.finish(store, [CHAT], turns=1)

    assert "down at start-up" in restarted.log()
    assert ACTION_FAILED_TEXT not in telegram.sent_texts(CHAT)
    assert len(shop.calls("cancel_order")) == 1
    edits = [call.params for call in telegram.calls_of("editMessageText") if call.ok]
    assert [(edit["message_id"], edit["text"]) for edit in edits] == [
        (card_id, ACTION_CHECKING_TEXT)
    ]
    client = SyncRedis.from_url(cluster.redis_url)
    try:
        letters = read_dead_letters(client, RedisKeys(PREFIX), 10)
    finally:
        client.close()
    assert [(letter.kind, letter.action_id, letter.server) for letter in letters] == [
        ("action", action_id, "shop")
    ]
    rows = [fields for _, fields in await store.xrange(STREAM) or [] if fields is not None]
    steps = [row for row in rows if row.get(b"type") == b"action"]
    assert [row.get(b"event") for row in steps] == [b"proposed", b"confirmed", b"failed"]
    assert steps[-1].get(b"error_code") == b"outcome_unknown"
    assert "Traceback" not in cluster.logs()
