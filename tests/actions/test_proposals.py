"""A write tool call in a turn: validated, checked, proposed, stored with the turn."""

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bot.actions.buttons import ActionPress, card_buttons
from bot.customer_texts import CONFIRM_LABEL, DECLINE_LABEL
from bot.llm.types import LLMResult, Message
from bot.settings import DEMO_SHOP_DATA
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys
from bot.testing.chat_harness import ChatHarness
from bot.testing.scripted_client import ScriptedClient, scripted, text_result, tool_result
from bot.tryout.demo_shop import RedisDemoShop
from tools.default_registry import build_default_tool_registry
from tools.shop_backend import Customer
from tools.shop_data import ShopData
from turn import ToolCall

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
USER = 4242
PREFIX = "proptest"


def tool_messages(client: ScriptedClient) -> list[dict[str, object]]:
    """The tool messages the model was sent, parsed."""
    last: list[Message] = client.requests[-1][0]
    return [json.loads(str(m["content"])) for m in last if m["role"] == "tool"]


@pytest.fixture
async def harness_for(
    redis_client: AsyncRedisClient,
) -> AsyncIterator[Callable[[ScriptedClient], ChatHarness]]:
    made: list[ChatHarness] = []

    def make(client: ScriptedClient) -> ChatHarness:
        shop_data = ShopData.load(DEMO_SHOP_DATA)
        shop = RedisDemoShop(redis_client, RedisKeys(PREFIX), shop_data, clock=lambda: NOW)
        registry = build_default_tool_registry(shop_data, clock=lambda: NOW, shop=shop)
        harness = ChatHarness(redis_client, client, prefix=PREFIX, registry=registry)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        await harness.close()


async def test_a_cancellable_order_becomes_a_pending_action_and_a_card(
    harness_for: Callable[[ScriptedClient], ChatHarness],
) -> None:
    client = scripted(
        tool_result("cancel_order", {"order_id": "8042", "reason": "передумал"}),
        text_result("Нажмите «Подтвердить» под карточкой."),
    )
    harness = harness_for(client)

    reply = await harness.ask("c1", "отмените заказ 8042", user_id=USER)

    [tool_message] = tool_messages(client)
    assert tool_message["ok"] is True
    data = tool_message["data"]
    assert isinstance(data, dict)
    assert data["status"] == "awaiting_confirmation"
    card = reply.card
    assert card is not None
    assert card.action_id == data["action_id"]
    assert card.text == (
        "Отменить заказ 8042: наушники, чехол для наушников. "
        "Деньги вернутся на карту в течение 5 дней."
    )
    [(confirm, yes), (decline, no)] = card_buttons(card)
    assert (confirm, decline) == (CONFIRM_LABEL, DECLINE_LABEL)
    assert ActionPress.unpack(yes) == ActionPress.of(card.action_id, "yes")
    assert ActionPress.unpack(no) == ActionPress.of(card.action_id, "no")
    assert len(yes.encode()) <= 64
    session = await harness.store.load("c1")
    assert session is not None
    assert session.pending_action is not None
    assert session.pending_action.action_id == card.action_id
    assert session.pending_action.user_id == USER
    # Nothing changed in the shop: the order still waits for the button.
    order = await RedisDemoShop(
        harness.redis, RedisKeys(PREFIX), ShopData.load(DEMO_SHOP_DATA)
    ).order(Customer(user_id=USER, chat_id="c1"), "8042")
    assert order is not None
    assert order.status == "processing"


async def test_a_precondition_failure_goes_back_to_the_model(
    harness_for: Callable[[ScriptedClient], ChatHarness],
) -> None:
    client = scripted(
        tool_result("cancel_order", {"order_id": "8041", "reason": "долго"}),
        text_result("Этот заказ уже в пути, отменить нельзя."),
    )
    harness = harness_for(client)

    reply = await harness.ask("c2", "отмените 8041", user_id=USER)

    [tool_message] = tool_messages(client)
    assert tool_message["ok"] is False
    error = tool_message["error"]
    assert isinstance(error, dict)
    assert error["code"] == "not_cancellable"
    assert reply.card is None
    session = await harness.store.load("c2")
    assert session is not None
    assert session.pending_action is None


async def test_invalid_arguments_are_a_rejection_the_model_may_fix(
    harness_for: Callable[[ScriptedClient], ChatHarness],
) -> None:
    client = scripted(
        tool_result("change_delivery_address", {"order_id": "8042"}),
        text_result("Уточните адрес."),
    )
    harness = harness_for(client)

    reply = await harness.ask("c3", "поменяйте адрес", user_id=USER)

    [tool_message] = tool_messages(client)
    error = tool_message["error"]
    assert isinstance(error, dict)
    assert error["code"] == "invalid_arguments"
    assert reply.card is None


async def test_a_new_proposal_supersedes_and_the_model_is_told_a_button_waits(
    harness_for: Callable[[ScriptedClient], ChatHarness],
) -> None:
    client = scripted(
        tool_result("cancel_order", {"order_id": "8042", "reason": "передумал"}),
        text_result("Подтвердите кнопкой."),
        text_result("Нажмите кнопку «Подтвердить», текстом я ничего не выполняю."),
        tool_result("change_delivery_address", {"order_id": "8042", "address": "Казань, 1"}),
        text_result("Подтвердите новый адрес кнопкой."),
    )
    harness = harness_for(client)
    first = await harness.ask("c4", "отмените 8042", user_id=USER)

    said_yes = await harness.ask("c4", "да", user_id=USER)

    assert said_yes.card is None
    sent = client.requests[-1][0]
    notes = [str(m["content"]) for m in sent if m["role"] == "developer"]
    assert first.card is not None
    assert any(first.card.action_id in note and "кнопк" in note for note in notes)
    session = await harness.store.load("c4")
    assert session is not None
    assert session.pending_action is not None
    assert session.pending_action.action_id == first.card.action_id

    second = await harness.ask("c4", "лучше поменяйте адрес на Казань, 1", user_id=USER)

    assert second.card is not None
    assert second.card.action_id != first.card.action_id
    session = await harness.store.load("c4")
    assert session is not None
    assert session.pending_action is not None
    assert session.pending_action.action_id == second.card.action_id


def two_writes_at_once() -> LLMResult:
    """One model response asking for two write tools (a server ignoring parallel_tool_calls)."""
    first, second = (
        ToolCall(id="call-cancel", name="cancel_order", arguments=json.dumps(CANCEL_8042)),
        ToolCall(id="call-address", name="change_delivery_address", arguments=json.dumps(MOVE)),
    )
    return replace(
        tool_result("cancel_order", CANCEL_8042), tool_calls=(first, second), response_id="r2"
    )


CANCEL_8042 = {"order_id": "8042", "reason": "передумал"}
MOVE = {"order_id": "8042", "address": "Казань, ул. Баумана, 1"}


@pytest.mark.parametrize("shape", ["one_response", "two_steps"])
async def test_a_second_write_in_one_turn_is_refused_to_the_model_and_audited(
    harness_for: Callable[[ScriptedClient], ChatHarness], shape: str
) -> None:
    steps = (
        [two_writes_at_once()]
        if shape == "one_response"
        else [
            tool_result("cancel_order", CANCEL_8042),
            tool_result("change_delivery_address", MOVE),
        ]
    )
    client = scripted(*steps, text_result("Подтвердите отмену кнопкой."))
    harness = harness_for(client)

    reply = await harness.ask("c5", "отмените 8042 или поменяйте адрес", user_id=USER)

    first, second = tool_messages(client)
    assert first["ok"] is True
    assert second["ok"] is False
    error = second["error"]
    assert isinstance(error, dict)
    assert error["code"] == "one_action_at_a_time"
    # The first proposal is the one card, and the one pending action.
    data = first["data"]
    assert isinstance(data, dict)
    assert reply.card is not None
    assert reply.card.action_id == data["action_id"]
    session = await harness.store.load("c5")
    assert session is not None
    assert session.pending_action is not None
    assert session.pending_action.action_id == data["action_id"]
    assert session.pending_action.tool_name == "cancel_order"
    entries = await harness.audit_entries()
    tools = [
        (e["tool_name"], e["status"], e.get("error_code", ""))
        for e in entries
        if e["type"] == "tool"
    ]
    assert tools == [
        ("cancel_order", "success", ""),
        ("change_delivery_address", "business_error", "one_action_at_a_time"),
    ]
    proposed = [e["tool_name"] for e in entries if e["type"] == "action"]
    assert proposed == ["cancel_order"]
