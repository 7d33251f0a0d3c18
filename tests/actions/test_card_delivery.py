"""A card reaches the customer through the retrying sender, or its action is withdrawn.

A 429 on the card's send, on a card's edit or on the satisfaction question is
waited and retried as for any reply. A card that still cannot be delivered
withdraws its pending action: the customer is told the buttons could not be
shown, the model's next turn knows no card waits, and the audit says why
(``failed``, ``card_not_delivered``). Real intake, dispatcher and worker over a
real Redis; the fake Bot API answers 429 where the test says.
"""

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiogram import Bot

from bot import customer_texts
from bot.engine.history import ACTION_NOTE
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import FakeTelegramServer
from tests.actions.test_telegram_actions import CHAT, Stack, _stack
from tests.telegram.test_csat import _stack as csat_stack

PROPOSING = "Проверьте карточку и нажмите «Подтвердить»."


def a_card(params: dict[str, Any]) -> bool:
    """A sendMessage call carrying inline buttons (a card or the satisfaction question)."""
    return params.get("reply_markup") is not None


@pytest.fixture
async def stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    # Two attempts per send: a card refused twice is not delivered.
    async for built in _stack(redis_server, telegram, bot, TELEGRAM_SEND_MAX_ATTEMPTS=2):
        yield built


async def test_a_429_on_the_card_is_waited_and_the_card_delivered(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    telegram.fail_next(
        "sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1, when=a_card
    )

    message_id, text, (yes, _) = await stack.card("отмените заказ 8042")

    assert text.startswith("Отменить заказ 8042")
    cards = [call.status for call in telegram.calls_of("sendMessage") if a_card(call.params)]
    assert cards == [429, 200]
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert session.pending_action is not None
    assert session.pending_action.action_id == yes.split(":")[1]
    # Its edit after the press is retried the same way.
    telegram.fail_next("editMessageText", 429, "Too Many Requests", retry_after=1)
    await stack.feed(telegram.callback_update(CHAT, message_id, yes))
    await telegram.wait_for(lambda: bool(stack.edits(message_id)))
    assert [edit["text"] for edit in stack.edits(message_id)] == ["✅ Заказ 8042 отменён"]
    assert [call.status for call in telegram.calls_of("editMessageText")] == [429, 200]


async def test_a_card_that_cannot_be_delivered_withdraws_its_action(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    telegram.fail_next("sendMessage", 429, "Too Many Requests", retry_after=0, times=2, when=a_card)

    await stack.feed(telegram.message_update(CHAT, "отмените заказ 8042"))
    await telegram.wait_for(lambda: customer_texts.CARD_NOT_DELIVERED in telegram.sent_texts(CHAT))

    assert telegram.keyboards(CHAT) == []
    texts = telegram.sent_texts(CHAT)
    assert texts[texts.index(PROPOSING) + 1] == customer_texts.CARD_NOT_DELIVERED
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert session.pending_action is None
    assert await stack.order("8042") == "processing"
    [proposed] = [m for m in session.messages if m.action_id]
    steps = await stack.wait_for_step(proposed.action_id or "", "failed")
    assert [(step["event"], step.get("error_code", "")) for step in steps] == [
        ("proposed", ""),
        ("failed", "card_not_delivered"),
    ]
    # The model's next turn reads that no card waits (and no note says one does).
    await stack.feed(telegram.message_update(CHAT, "ну что там?"))
    await telegram.wait_for(lambda: "Ответ: ну что там?" in telegram.sent_texts(CHAT))
    sent = stack.model.requests[-1][0]
    assert any(
        str(m["content"]).startswith(ACTION_NOTE) and "кнопки" in str(m["content"])
        for m in sent
        if m["role"] == "assistant"
    )
    assert not any(
        m["role"] == "developer" and "ждёт решения клиента" in str(m["content"]) for m in sent
    )


async def test_a_429_on_the_satisfaction_question_is_waited_and_the_question_asked(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> None:
    async with csat_stack(redis_server, telegram, bot) as stack:
        telegram.fail_next(
            "sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1, when=a_card
        )
        stack.start_sweeper()
        await stack.ask("привет")

        await telegram.wait_for(lambda: bool(stack.questions()))
        asked = [call.status for call in telegram.calls_of("sendMessage") if a_card(call.params)]
        assert asked == [429, 200]
        [entry] = await stack.wait_feedback(1)
        assert entry["event"] == "asked"
