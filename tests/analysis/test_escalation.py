"""Escalation end to end: an upset customer is offered a person once, and the press hands off.

Real parts: the in-process Telegram stack (intake, workers, sweepers) against the
fake Bot API, a real Redis, and the real openai SDK against the scripted server,
which answers every analysis (a ``response_format`` request) negative and urgent.
The idle analysis is an hour away: what is analysed here is analysed early.
"""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiogram import Bot
from aiogram.types import CallbackQuery

from bot import customer_texts
from bot.analysis.upset import looks_upset
from bot.handoff.feature import HandoffFeature
from bot.storage.keys import telegram_conversation
from bot.telegram.callbacks import press_incoming, read_press
from bot.telegram.escalation_offer import CALLBACK_DATA
from bot.testing.audit_entries import stream_entries
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, text_answer
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings, stack_env
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application

pytestmark = pytest.mark.timeout(60)

CHAT = 9400
STAFF = -1009400
PREFIX = "esc"
UPSET = "Это ужасно, где мои деньги? Срочно!"
UPSET_AGAIN = "Безобразие, ничего не работает!!"
CALM = "Подскажите, где мой заказ 8041?"
ANGRY = {
    "category": "payment",
    "sentiment": "negative",
    "urgency": "high",
    "language": "ru",
    "resolved": False,
    "summary": "Клиент возмущён: списали деньги, заказа нет.",
    "next_step": "Проверить платёж.",
}


async def until(check: Callable[[], Awaitable[bool]], within: float = 15.0) -> None:
    async with asyncio.timeout(within):
        while True:
            if await check():
                return
            await asyncio.sleep(0.02)


class Model:
    """Chat requests are echoed; analysis requests get the angry, urgent analysis."""

    def __init__(self, server: ScriptedOpenAIServer) -> None:
        self.server = server
        server.responder = self.answer

    def answer(self, body: Any) -> Reply:
        if "response_format" in body:
            return text_answer(json.dumps(ANGRY, ensure_ascii=False))
        return text_answer(f"Ответ: {body['messages'][-1]['content']}")

    def analysis_requests(self) -> int:
        return sum("response_format" in r.body for r in self.server.requests)


@contextlib.asynccontextmanager
async def running_bot(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    bot: Bot,
    *,
    staff: bool = True,
    sweep: bool = True,
    **env: Any,
) -> AsyncIterator[TelegramStack]:
    if staff:
        telegram.make_forum(STAFF)
    settings = make_settings(
        **stack_env(telegram, model, redis_server.url, prefix=PREFIX),
        CSAT="off",
        CSAT_AFTER_IDLE_MINUTES=env.pop("CSAT_AFTER_IDLE_MINUTES", 60),
        **({"STAFF_CHAT_ID": STAFF} if staff else {}),
        **env,
    )
    async with open_application(settings) as app:
        stack = TelegramStack(app, bot, telegram=telegram, sweep_period_seconds=0.02)
        async with stack.running(sweep=sweep):
            yield stack


async def audit(stack: TelegramStack, entry_type: str) -> list[dict[str, str]]:
    entries = await stream_entries(stack.app.redis, f"{PREFIX}:audit")
    return [entry for entry in entries if entry.get("type") == entry_type]


async def say(stack: TelegramStack, telegram: FakeTelegramServer, text: str) -> None:
    await stack.feed(telegram.message_update(CHAT, text))
    await telegram.wait_for(lambda: f"Ответ: {text}" in telegram.sent_texts(CHAT))


def test_the_word_check_tells_upset_from_calm():
    assert looks_upset(UPSET)
    assert looks_upset(UPSET_AGAIN)
    assert not looks_upset(CALM)


async def test_an_upset_customer_is_offered_a_person_once_and_the_press_hands_off(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
):
    model = Model(openai_server)
    async with running_bot(redis_server, telegram, openai_server, bot) as stack:
        await say(stack, telegram, UPSET)
        await telegram.wait_for(lambda: len(telegram.keyboards(CHAT)) == 1)
        [(offer_id, text, keyboard)] = telegram.keyboards(CHAT)
        assert text == customer_texts.ESCALATION_OFFER
        assert keyboard == [
            [{"text": customer_texts.ESCALATION_BUTTON, "callback_data": CALLBACK_DATA}]
        ]

        async def offers() -> list[dict[str, str]]:
            return [e for e in await audit(stack, "analysis") if e["event"] != "analysed"]

        # The entry is written once Telegram took the offer.
        await until(lambda: _non_empty(offers))
        [offered] = await offers()
        assert offered["event"] == "escalation_offered"
        assert not any("деньг" in value for value in offered.values())

        # A second upset message is analysed again (another turn), angry again: no second offer.
        await say(stack, telegram, UPSET_AGAIN)

        async def analysed_twice() -> bool:
            events = [e["event"] for e in await audit(stack, "analysis")]
            return events.count("analysed") == 2

        async def swept() -> bool:
            return await stack.app.redis.zcard(stack.app.keys.analysis_soon) == 0

        await until(analysed_twice)
        # The sweeper is done with it (a second offer would be queued by now), and the
        # chat's queue is drained (a second offer would be sent by now).
        await until(swept)
        await stack.settle(CHAT)
        assert model.analysis_requests() == 2
        assert len(telegram.keyboards(CHAT)) == 1
        events = [e["event"] for e in await audit(stack, "analysis")]
        assert events.count("escalation_offered") == 1

        # The press opens the handoff as /operator does; the button goes away.
        await stack.feed(telegram.callback_update(CHAT, offer_id, CALLBACK_DATA))
        await telegram.wait_for(
            lambda: any(
                t.startswith(customer_texts.OPERATOR_WAITING) for t in telegram.sent_texts(CHAT)
            )
        )
        await telegram.wait_for(lambda: len(telegram.topics(STAFF)) == 1)
        edits = [c.params for c in telegram.calls_of("editMessageText") if c.ok]
        assert [(e["message_id"], e["text"]) for e in edits] == [
            (offer_id, customer_texts.ESCALATION_PRESSED)
        ]
        assert "reply_markup" not in edits[0]

        async def opened() -> list[dict[str, str]]:
            return [e for e in await audit(stack, "handoff") if e.get("event") == "opened"]

        await until(lambda: _non_empty(opened))
        [entry] = await opened()
        assert entry["trigger"] == "analysis"
        value = stack.app.metrics.registry.get_sample_value
        assert value("support_handoffs_opened_total", {"trigger": "analysis"}) == 1
        assert value("support_escalations_offered_total") == 1
        # The offer is not a failed analysis in the numbers.
        assert not value("support_analyses_total", {"category": "none", "outcome": "failed"})
        assert stack.app.features.get(HandoffFeature) is not None
        session = await stack.app.sessions.load(telegram_conversation(CHAT))
        assert session is not None
        assert session.handoff != "bot"


async def _non_empty(read: Callable[[], Awaitable[list[dict[str, str]]]]) -> bool:
    return bool(await read())


async def test_without_a_staff_group_an_angry_analysis_offers_nobody(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
):
    model = Model(openai_server)
    async with running_bot(
        redis_server, telegram, openai_server, bot, staff=False, CSAT_AFTER_IDLE_MINUTES=0.002
    ) as stack:
        await say(stack, telegram, UPSET)
        # Analysed when idle (120 ms on), negative and urgent: still no offer without staff.

        async def analysed() -> bool:
            return any(e["event"] == "analysed" for e in await audit(stack, "analysis"))

        await until(analysed)
        assert model.analysis_requests() == 1
        assert await stack.app.redis.zcard(stack.app.keys.analysis_soon) == 0
        assert telegram.keyboards(CHAT) == []
        assert [e["event"] for e in await audit(stack, "analysis")] == ["analysed"]
        assert telegram.sent_texts(CHAT) == [f"Ответ: {UPSET}"]


async def test_a_calm_message_asks_for_no_early_analysis_and_an_upset_one_does(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
):
    Model(openai_server)
    # No sweepers: what the turn scheduled stays in the zset to be read.
    async with running_bot(redis_server, telegram, openai_server, bot, sweep=False) as stack:
        soon = stack.app.keys.analysis_soon
        key = telegram_conversation(CHAT)
        await say(stack, telegram, CALM)
        assert await stack.app.redis.zscore(soon, key) is None
        await say(stack, telegram, UPSET)
        assert await stack.app.redis.zscore(soon, key) is not None


@pytest.mark.parametrize(
    ("data", "accepted"),
    [(CALLBACK_DATA, True), ("esc:person ", False), ("esc:", False), ("esc:staff", False)],
)
def test_intake_takes_the_offer_press_and_nothing_like_it(
    telegram: FakeTelegramServer, data: str, accepted: bool
):
    update = telegram.callback_update(CHAT, 5, data)
    callback = CallbackQuery.model_validate(update["callback_query"])
    incoming = press_incoming(update["update_id"], callback, read_press(data), update)
    assert (incoming is not None) is accepted
    if incoming is not None:
        # A press is never a model turn and never spends the message flood budget.
        assert (incoming.user_id, incoming.counts_turn) == (None, False)
        assert incoming.conversation_key == telegram_conversation(CHAT)


GROUP = -9401


async def test_a_group_chat_is_never_offered_a_person(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
):
    model = Model(openai_server)
    async with running_bot(
        redis_server,
        telegram,
        openai_server,
        bot,
        TELEGRAM_ALLOW_GROUPS=True,
        CSAT_AFTER_IDLE_MINUTES=0.002,
    ) as stack:
        mention = f"@{telegram.bot_username}"
        update = telegram.message_update(
            GROUP, f"{mention} {UPSET}", user_id=CHAT, chat_type="group"
        )
        update["message"]["entities"] = [{"type": "mention", "offset": 0, "length": len(mention)}]
        await stack.feed(update)
        await telegram.wait_for(lambda: f"Ответ: {UPSET}" in telegram.sent_texts(GROUP))

        async def analysed() -> bool:
            return any(e["event"] == "analysed" for e in await audit(stack, "analysis"))

        async def swept() -> bool:
            return await stack.app.redis.zcard(stack.app.keys.analysis_soon) == 0

        # Not analysed early (private chats only) but when idle (120 ms on), negative and
        # urgent: in a group the button would be anyone's, so no offer is queued (one queued
        # would be sent before the /help barrier).
        await until(analysed)
        await until(swept)
        await stack.settle(GROUP)
        assert model.analysis_requests() == 1
        assert telegram.keyboards(GROUP) == []
        assert telegram.keyboards(CHAT) == []
        assert [e["event"] for e in await audit(stack, "analysis")] == ["analysed"]


async def _offered(stack: TelegramStack, telegram: FakeTelegramServer) -> int:
    await say(stack, telegram, UPSET)
    await telegram.wait_for(lambda: len(telegram.keyboards(CHAT)) == 1)
    [(offer_id, _, _)] = telegram.keyboards(CHAT)
    return offer_id


async def test_a_press_by_someone_else_changes_nothing(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
):
    Model(openai_server)
    async with running_bot(redis_server, telegram, openai_server, bot) as stack:
        offer_id = await _offered(stack, telegram)
        # A forged press: another user's press of a button in this customer's chat.
        await stack.feed(telegram.callback_update(CHAT, offer_id, CALLBACK_DATA, user_id=CHAT + 1))
        await stack.settle(CHAT)
        assert [c for c in telegram.calls_of("editMessageText") if c.ok] == []
        assert not telegram.topics(STAFF)
        assert await audit(stack, "handoff") == []
        session = await stack.app.sessions.load(telegram_conversation(CHAT))
        assert session is not None
        assert session.handoff == "bot"
        assert not any(
            t.startswith(customer_texts.OPERATOR_WAITING) for t in telegram.sent_texts(CHAT)
        )


async def test_a_press_once_the_staff_group_is_gone_is_answered_and_the_button_removed(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
):
    Model(openai_server)
    async with running_bot(redis_server, telegram, openai_server, bot) as stack:
        offer_id = await _offered(stack, telegram)
    # The bot restarts without STAFF_CHAT_ID (the same Redis); the offer is still in the chat.
    async with running_bot(redis_server, telegram, openai_server, bot, staff=False) as stack:
        await stack.feed(telegram.callback_update(CHAT, offer_id, CALLBACK_DATA))
        await telegram.wait_for(
            lambda: any(
                t.startswith(customer_texts.OPERATOR_OFF) for t in telegram.sent_texts(CHAT)
            )
        )
        edits = [c.params for c in telegram.calls_of("editMessageText") if c.ok]
        assert [(e["message_id"], e["text"]) for e in edits] == [
            (offer_id, customer_texts.ESCALATION_PRESSED)
        ]
        assert "reply_markup" not in edits[0]
        assert not telegram.topics(STAFF)
        assert await audit(stack, "handoff") == []
