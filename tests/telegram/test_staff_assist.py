"""Staff assist end to end: the fake Bot API, a real Redis, the scripted model over HTTP.

A handed-over customer writes; after the relay a suggested reply with its buttons
appears in their topic; staff press "send as is" and the customer gets that text.
A suggestion that needs a write sends the customer a card only on staff's press,
and the action runs only on the customer's press. Every handoff carries a reason
(topic and audit); idle conversations get a score; ``support-audit stats`` shows the
acceptance rate, the reasons and the scores; no customer text enters the audit.
"""

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiogram import Bot

from bot import customer_texts, staff_texts
from bot.app import Application
from bot.handoff.feature import HandoffFeature
from bot.settings import DEMO_SHOP_DATA
from bot.storage.keys import telegram_conversation
from bot.support_audit.cli import main as support_audit
from bot.testing.audit_entries import stream_entries
from bot.testing.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    error,
    text_answer,
    tool_call_answer,
)
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings, stack_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from bot.tryout.demo_shop import RedisDemoShop
from tools.shop_backend import Customer
from tools.shop_data import ShopData

pytestmark = pytest.mark.timeout(90)

STAFF = -1004800
CUSTOMER = 4801
STAFF_MEMBER = 555
PREFIX = "assist"
WHERE = "Где мой заказ 8041? Секрет-слово-клиента"
CANCEL = "Отмените заказ 8042, пожалуйста"
BROKEN = "Это сломает подсказку"
SUGGESTED = "Ваш заказ 8041 передан в службу доставки, ожидается 5 декабря."
SUGGESTED_CANCEL = "Отправляю вам карточку отмены заказа 8042: подтвердите кнопкой."
ANALYSIS = {
    "category": "order_status",
    "sentiment": "neutral",
    "urgency": "normal",
    "language": "ru",
    "resolved": True,
    "summary": "Клиент спросил о заказе.",
    "next_step": None,
    "quality": {"score": 2, "failed": ["resolved", "tone"]},
}


def suggesting(body: Any) -> bool:
    return "помогаешь сотруднику" in str(body["messages"][0]["content"])


def respond(body: Any) -> Reply:
    """The scripted model: analyses, suggestions (reading or proposing), the bot's answers."""
    if "response_format" in body:
        return text_answer(json.dumps(ANALYSIS, ensure_ascii=False))
    messages = body["messages"]
    last = messages[-1]
    if suggesting(body):
        newest = str(messages[2]["content"])
        if BROKEN in newest:
            return error(500, headers={"x-should-retry": "false"})
        if last["role"] == "tool":
            return text_answer(SUGGESTED_CANCEL if "8042" in newest else SUGGESTED)
        if "8042" in newest:
            return tool_call_answer("cancel_order", {"order_id": "8042", "reason": "передумал"})
        return tool_call_answer("get_order_status", {"order_id": "8041"})
    return text_answer(f"Ответ бота: {last['content']}")


class Stack(TelegramStack):
    """Intake and workers of a bot with a staff group and staff assist on."""

    def __init__(
        self, app: Application, bot: Bot, telegram: FakeTelegramServer, model: ScriptedOpenAIServer
    ) -> None:
        super().__init__(app, bot, telegram=telegram, sweep_period_seconds=0.05)
        self.model = model

    async def customer(self, text: str) -> None:
        await self.feed(self.telegram.message_update(CUSTOMER, text))

    async def staff(self, thread: int, text: str) -> None:
        await self.feed(self.telegram.topic_message_update(STAFF, thread, text))

    async def press_staff(self, message_id: int, data: str, user_id: int = STAFF_MEMBER) -> None:
        await self.feed(
            self.telegram.callback_update(
                STAFF, message_id, data, user_id=user_id, chat_type="supergroup"
            )
        )

    async def press_customer(self, message_id: int, data: str) -> None:
        await self.feed(self.telegram.callback_update(CUSTOMER, message_id, data))

    async def hand_off(self) -> int:
        """``/operator``, then a staff member's first answer: a person is in charge."""
        await self.customer("/operator")
        handoff = self.app.features.get(HandoffFeature)
        assert handoff is not None
        topics = handoff.service.topics
        key = telegram_conversation(CUSTOMER)
        thread = None
        for _ in range(400):
            thread = await topics.topic_of(key)
            if thread is not None:
                break
            await asyncio.sleep(0.025)
        assert thread is not None
        await self.telegram.wait_for(
            lambda: any(t.startswith("Клиент:") for t in self.telegram.topic_texts(STAFF, thread))
        )
        copies = len(self.telegram.copies(CUSTOMER))
        await self.staff(thread, "Здравствуйте, я сотрудник поддержки.")
        await self.telegram.wait_for(lambda: len(self.telegram.copies(CUSTOMER)) > copies)
        return thread

    async def drained(self) -> None:
        """Wait until the customer's queue and outbox are empty (every job queued so far ran;
        in a handoff ``/help`` goes to staff, so it is no barrier)."""
        keys = self.app.keys.conversation(telegram_conversation(CUSTOMER))
        redis = self.app.redis
        for _ in range(400):
            if not await redis.llen(keys.queue) and not await redis.exists(keys.outbox):
                return
            await asyncio.sleep(0.025)
        raise AssertionError("the customer's queue never drained")

    async def audit_until(
        self, done: Callable[[list[dict[str, str]]], bool]
    ) -> list[dict[str, str]]:
        """The audit once ``done`` holds for it (the entries follow the delivery)."""
        for _ in range(400):
            entries = await self.audit()
            if done(entries):
                return entries
            await asyncio.sleep(0.025)
        raise AssertionError("the audit never got there")

    def suggestions(self) -> list[tuple[int, str, list[list[dict[str, Any]]]]]:
        header = staff_texts.SUGGESTION_HEADER.split("(")[0]
        return [k for k in self.telegram.keyboards(STAFF) if k[1].startswith(header)]

    async def audit(self) -> list[dict[str, str]]:
        return await stream_entries(self.app.redis, f"{PREFIX}:audit")


@contextlib.asynccontextmanager
async def _stack(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
    **env: Any,
) -> AsyncIterator[Stack]:
    telegram.make_forum(STAFF)
    openai_server.responder = respond
    settings = stack_settings(
        telegram,
        openai_server,
        redis_server.url,
        prefix=PREFIX,
        STREAMING="off",
        SESSION_LEASE_SECONDS=3,
        STAFF_CHAT_ID=STAFF,
        CSAT="off",
        FLOOD_BURST=100,
        **env,
    )
    async with open_application(settings) as app:
        stack = Stack(app, bot, telegram, openai_server)
        async with stack.running():
            yield stack


def audit_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str, *argv: str
) -> str:
    """``support-audit ARGV`` over the test's stream, in 80 columns; what it printed."""
    for name, value in {
        "REDIS_URL": url,
        "AUDIT_STREAM": f"{PREFIX}:audit",
        "AUDIT_PSEUDONYMIZE_CHAT_IDS": "false",
        "COLUMNS": "80",
    }.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    assert support_audit(list(argv)) == 0
    return capsys.readouterr().out


@pytest.fixture
async def stack(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
) -> AsyncIterator[Stack]:
    async with _stack(redis_server, telegram, openai_server, bot) as built:
        yield built


async def test_a_suggestion_follows_the_relay_and_staff_send_it_as_is(
    stack: Stack,
    redis_server: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    telegram = stack.telegram
    thread = await stack.hand_off()
    header = telegram.topic_texts(STAFF, thread)[0]
    assert "Причина передачи: клиент попросил человека" in header

    await stack.customer(WHERE)
    await telegram.wait_for(lambda: len(stack.suggestions()) == 1)
    [(message_id, text, keyboard)] = stack.suggestions()
    # The relay came first: the customer's message is in the topic before the suggestion.
    relays = [
        c.at
        for c in telegram.calls_of("copyMessage")
        if c.ok and c.params.get("message_thread_id") == thread
    ]
    posted = [c.at for c in telegram.calls_of("sendMessage") if c.result_id == message_id]
    assert relays
    assert posted
    assert relays[-1] <= posted[0]
    assert SUGGESTED in text
    [[send]] = keyboard
    assert send["text"] == staff_texts.SUGGESTION_SEND
    # The drafting model read the order with the read tool, in the customer's language.
    drafting = [r.body for r in stack.model.requests if r.body and suggesting(r.body)]
    assert any(m.get("role") == "tool" for m in drafting[-1]["messages"])
    assert "русский" in drafting[0]["messages"][0]["content"]

    await stack.press_staff(message_id, send["callback_data"])
    await telegram.wait_for(lambda: SUGGESTED in telegram.sent_texts(CUSTOMER))
    # The suggestion's buttons are gone; a second press changes nothing.
    await telegram.wait_for(
        lambda: any(
            c.params.get("message_id") == message_id for c in telegram.calls_of("editMessageText")
        )
    )
    await stack.press_staff(message_id, send["callback_data"])
    await stack.drained()
    assert telegram.sent_texts(CUSTOMER).count(SUGGESTED) == 1

    entries = await stack.audit()
    events = [e["event"] for e in entries if e["type"] == "assist"]
    assert events == ["suggested", "sent"]
    opened = [e for e in entries if e["type"] == "handoff" and e["event"] == "opened"]
    assert [e["handoff_reason"] for e in opened] == ["customer_asked"]
    # No customer text and no suggestion text in the audit.
    flat = json.dumps(entries, ensure_ascii=False)
    assert "Секрет-слово-клиента" not in flat
    assert SUGGESTED not in flat

    report = json.loads(audit_cli(monkeypatch, capsys, redis_server.url, "stats", "--json"))
    assert report["assist"]["acceptance"] == 1.0
    assert report["assist"]["events"]["sent"] == 1
    assert report["handoffs"]["reasons"] == {"customer_asked": 1}
    text = audit_cli(monkeypatch, capsys, redis_server.url, "stats")
    assert "acceptance 100.0%" in text
    assert "customer_asked 1" in text
    assert all(len(line) <= 80 for line in text.splitlines())


async def test_a_newer_message_replaces_an_unsent_suggestion(stack: Stack) -> None:
    telegram = stack.telegram
    thread = await stack.hand_off()
    await stack.customer(WHERE)
    await telegram.wait_for(lambda: len(stack.suggestions()) == 1)
    [(old_id, _text, [[old_send]])] = stack.suggestions()
    await stack.customer("И ещё: где заказ 8041 сейчас?")
    await telegram.wait_for(lambda: len(stack.suggestions()) == 2)

    answers = len(telegram.calls_of("answerCallbackQuery"))
    await stack.press_staff(old_id, old_send["callback_data"])
    await telegram.wait_for(lambda: len(telegram.calls_of("answerCallbackQuery")) > answers)
    answer = telegram.calls_of("answerCallbackQuery")[-1]
    assert answer.params.get("text") == staff_texts.SUGGESTION_OUT_OF_DATE
    await stack.drained()
    assert SUGGESTED not in telegram.sent_texts(CUSTOMER)

    # Staff write their own answer: the open suggestion ends as "own".
    await stack.staff(thread, "Сейчас проверю сам.")
    await stack.drained()
    events = [e["event"] for e in await stack.audit() if e["type"] == "assist"]
    assert events == ["suggested", "replaced", "suggested", "own"]


async def test_a_suggestion_needing_a_write_sends_a_card_only_on_staffs_press(
    stack: Stack,
) -> None:
    telegram = stack.telegram
    await stack.hand_off()
    await stack.customer(CANCEL)
    await telegram.wait_for(lambda: len(stack.suggestions()) == 1)
    [(message_id, text, keyboard)] = stack.suggestions()
    assert SUGGESTED_CANCEL in text
    [[_send], [card_button]] = keyboard
    assert card_button["text"] == staff_texts.SUGGESTION_SEND_CARD
    # Nothing was proposed to the customer yet.
    assert telegram.keyboards(CUSTOMER) == []
    assert not any(e["type"] == "action" for e in await stack.audit())

    await stack.press_staff(message_id, card_button["callback_data"])
    await telegram.wait_for(lambda: len(telegram.keyboards(CUSTOMER)) == 1)
    [(card_id, card_text, [[confirm, _decline]])] = telegram.keyboards(CUSTOMER)
    assert "8042" in card_text
    entries = await stack.audit_until(lambda found: any(e["type"] == "action" for e in found))
    assert [e["event"] for e in entries if e["type"] == "action"] == ["proposed"]

    await stack.press_customer(card_id, confirm["callback_data"])
    entries = await stack.audit_until(
        lambda found: any(e["type"] == "action" and e["event"] == "executed" for e in found)
    )
    actions = [e["event"] for e in entries if e["type"] == "action"]
    assert actions.count("executed") == 1
    # A second press does not run it again.
    await stack.press_customer(card_id, confirm["callback_data"])
    await stack.drained()
    actions = [e["event"] for e in await stack.audit() if e["type"] == "action"]
    assert actions.count("executed") == 1
    assert [e["event"] for e in await stack.audit() if e["type"] == "assist"] == [
        "suggested",
        "card_sent",
    ]


async def test_a_failed_draft_is_one_line_in_the_topic(stack: Stack) -> None:
    telegram = stack.telegram
    thread = await stack.hand_off()
    await stack.customer(BROKEN)
    failed = staff_texts.SUGGESTION_FAILED.split("(")[0]
    await telegram.wait_for(
        lambda: any(t.startswith(failed) for t in telegram.topic_texts(STAFF, thread))
    )
    assert stack.suggestions() == []
    events = [e for e in await stack.audit() if e["type"] == "assist"]
    assert [(e["event"], e.get("error")) for e in events] == [("suggestion_failed", "unavailable")]
    # The customer never hears of it.
    assert not any("сбой" in t.lower() for t in telegram.sent_texts(CUSTOMER)[1:])


async def test_with_suggestions_off_no_model_call_is_made(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
) -> None:
    async with _stack(
        redis_server, telegram, openai_server, bot, STAFF_SUGGESTIONS="off", ANALYSIS="off"
    ) as stack:
        thread = await stack.hand_off()
        calls = len(openai_server.requests)
        relayed = len(telegram.copies(STAFF, thread))
        await stack.customer(WHERE)
        await telegram.wait_for(lambda: len(telegram.copies(STAFF, thread)) > relayed)
        await stack.drained()
        assert len(openai_server.requests) == calls
        assert stack.suggestions() == []


async def test_idle_conversations_are_scored_and_stats_show_it(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
    *,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with (
        _stack(
            redis_server,
            telegram,
            openai_server,
            bot,
            CSAT_AFTER_IDLE_MINUTES=0.001,
            QUALITY_REVIEW_BELOW=3,
        ) as stack,
        stack.running(work=False, sweep=True),
    ):
        await stack.customer("Где мой заказ 8041? Секрет-слово-клиента")
        await telegram.wait_for(
            lambda: any(t.startswith("Ответ бота") for t in telegram.sent_texts(CUSTOMER))
        )

        async def scored() -> list[dict[str, str]]:
            return [e for e in await stack.audit() if e["type"] == "analysis" and e.get("quality")]

        await stack.audit_until(
            lambda found: any(e["type"] == "analysis" and e.get("quality") for e in found)
        )
        [entry] = await scored()
        flat = json.dumps(await stack.audit(), ensure_ascii=False)
        assert "Секрет-слово-клиента" not in flat
        assert str(ANALYSIS["summary"]) not in flat
        assert entry["quality"] == "2"
        assert entry["failed_criteria"] == "resolved,tone"
        assert re.fullmatch(r"[A-Z0-9]+", entry["turn_codes"].split(",")[0])
        # A score below QUALITY_REVIEW_BELOW opens a review topic.
        review = staff_texts.QUALITY_REVIEW_HEADER.split("{")[0]
        await telegram.wait_for(
            lambda: any(t.startswith(review) for t in telegram.sent_texts(STAFF))
        )
        assert not any(customer_texts.OPERATOR_WAITING in t for t in telegram.sent_texts())

    report = json.loads(audit_cli(monkeypatch, capsys, redis_server.url, "stats", "--json"))
    assert report["analysis"]["quality"] == {"2": 1}
    assert report["analysis"]["resolved"] == {"by_bot": 1, "by_staff": 0}
    text = audit_cli(monkeypatch, capsys, redis_server.url, "stats")
    assert "quality of 1 bot-alone conversations (1-5): 1: 0  2: 1" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    table = audit_cli(monkeypatch, capsys, redis_server.url, "quality", "--worst", "5")
    assert entry["turn_codes"].split(",")[0] in table
    assert "res,tone" in table
    assert all(len(line) <= 80 for line in table.splitlines())


async def test_a_suggestion_left_when_staff_close_is_unused_and_out_of_date(stack: Stack) -> None:
    telegram = stack.telegram
    thread = await stack.hand_off()
    await stack.customer(WHERE)
    await telegram.wait_for(lambda: len(stack.suggestions()) == 1)
    [(message_id, _text, [[send]])] = stack.suggestions()
    await stack.staff(thread, "/close")
    await stack.drained()
    await stack.press_staff(message_id, send["callback_data"])
    await stack.drained()
    assert SUGGESTED not in telegram.sent_texts(CUSTOMER)
    answer = telegram.calls_of("answerCallbackQuery")[-1]
    assert answer.params.get("text") == staff_texts.SUGGESTION_OUT_OF_DATE
    events = [e["event"] for e in await stack.audit() if e["type"] == "assist"]
    assert events == ["suggested", "unused"]


async def test_a_card_is_checked_again_on_staffs_press(stack: Stack) -> None:
    """The order changed after the draft: staff are told, the customer gets no card."""
    telegram = stack.telegram
    thread = await stack.hand_off()
    await stack.customer(CANCEL)
    await telegram.wait_for(lambda: len(stack.suggestions()) == 1)
    [(message_id, _text, [[_send], [card_button]])] = stack.suggestions()
    shop = RedisDemoShop(stack.app.redis, stack.app.keys, ShopData.load(DEMO_SHOP_DATA))
    await shop.cancel_order(
        Customer(user_id=CUSTOMER, chat_id=CUSTOMER), "8042", "-", idempotency_key="meanwhile"
    )

    await stack.press_staff(message_id, card_button["callback_data"])
    refused = staff_texts.SUGGESTION_CARD_REFUSED.split("{")[0]
    await telegram.wait_for(
        lambda: any(t.startswith(refused) for t in telegram.topic_texts(STAFF, thread))
    )
    await stack.drained()
    assert telegram.keyboards(CUSTOMER) == []
    assert not any(e["type"] == "action" for e in await stack.audit())


async def test_the_offline_demo_model_drafts_suggestions_too(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
) -> None:
    """The try-out (LLM_BACKEND=offline) shows suggestions without a key or a network."""
    telegram.make_forum(STAFF)
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX=PREFIX,
        AUDIT_STREAM=f"{PREFIX}:audit",
        SESSION_LEASE_SECONDS=3,
        STAFF_CHAT_ID=STAFF,
        CSAT="off",
        STREAMING="off",
    )
    async with open_application(settings) as app:
        stack = Stack(app, bot, telegram, openai_server)
        async with stack.running():
            await stack.hand_off()
            await stack.customer("Где мой заказ 8041?")
            await telegram.wait_for(lambda: len(stack.suggestions()) == 1)
            [(_id, text, [[send]])] = stack.suggestions()
            assert "8041" in text
            assert send["text"] == staff_texts.SUGGESTION_SEND
            assert openai_server.requests == []
