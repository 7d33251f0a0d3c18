"""The customer's language end to end: the fake Bot API, real Redis, the real dispatcher and
workers, and the model over HTTP (the scripted OpenAI-compatible server).

A customer whose Telegram is English and who writes English reads the bot's own texts in
English (greeting, a failure with its incident code, a card, its buttons and outcome, the
satisfaction question and its thanks, the offer of a person and its button, the note when a
handoff went idle, a voice message refused); writing Russian, the same customer reads Russian;
``/language`` fixes the choice. The model's request names the language to answer in.
"""

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiogram import Bot

from bot import customer_texts
from bot.app import Application
from bot.testing.audit_entries import stream_entries
from bot.testing.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    error,
    text_answer,
    tool_call_answer,
)
from bot.testing.redis_server import RedisServer
from bot.testing.settings import stack_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application

pytestmark = pytest.mark.timeout(90)

CHAT = 8300
STAFF = -1008300
PREFIX = "lang"
ORDER = re.compile(r"\b(\d{4})\b")


def respond(body: Any) -> Reply:
    """The scripted model: a failure, a proposal to cancel, or an echo of the question."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text_answer("Check the card / Проверьте карточку.")
    text = str(last["content"])
    if "fail" in text or "сбой" in text:
        return error(500, headers={"x-should-retry": "false"})
    if (order := ORDER.search(text)) is not None and ("cancel" in text or "отмени" in text):
        return tool_call_answer("cancel_order", {"order_id": order.group(1), "reason": "-"})
    return text_answer(f"Answer: {text}")


def instruction(body: Any) -> str:
    """The developer message the model was given."""
    return str(body["messages"][0]["content"])


class Stack(TelegramStack):
    """Intake and a worker pool; the CSAT sweeper started on demand."""

    def __init__(
        self, app: Application, bot: Bot, telegram: FakeTelegramServer, model: ScriptedOpenAIServer
    ) -> None:
        super().__init__(app, bot, telegram=telegram, sweep_period_seconds=0.02)
        self.model = model
        self.sweeping: asyncio.Task[None] | None = None

    async def say(self, text: str, *, code: str | None = "en") -> str:
        """The customer writes ``text``; the bot's next message."""
        before = len(self.telegram.sent_texts(CHAT))
        await self.feed(self.telegram.message_update(CHAT, text, language_code=code))
        return (await self.telegram.wait_for_texts(CHAT, before + 1))[before]

    async def press(self, message_id: int, data: str) -> None:
        await self.feed(self.telegram.callback_update(CHAT, message_id, data, language_code="en"))

    def edits(self, message_id: int) -> list[str]:
        return [
            str(call.params["text"])
            for call in self.telegram.calls_of("editMessageText")
            if call.ok and call.params.get("message_id") == message_id
        ]

    async def turn_languages(self) -> list[str]:
        entries = await stream_entries(self.app.redis, f"{PREFIX}:audit")
        return [entry.get("language", "") for entry in entries if entry.get("type") == "turn"]

    def start_sweeper(self) -> None:
        sweeper = self.side.sweeper("csat")
        assert sweeper is not None
        self.sweeping = asyncio.create_task(sweeper.run())

    async def stop_sweeper(self) -> None:
        sweeper = self.side.sweeper("csat")
        if sweeper is not None and self.sweeping is not None:
            sweeper.stop()
            await self.sweeping


@contextlib.asynccontextmanager
async def _stack(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
) -> AsyncIterator[Stack]:
    openai_server.responder = respond
    settings = stack_settings(
        telegram,
        openai_server,
        redis_server.url,
        prefix=PREFIX,
        STREAMING="off",
        SESSION_LEASE_SECONDS=3,
        CSAT_AFTER_IDLE_MINUTES=0.001,
        # A test's customer writes a dozen messages in a second: no flood limit in the way.
        FLOOD_BURST=100,
    )
    async with open_application(settings) as app:
        stack = Stack(app, bot, telegram, openai_server)
        async with stack.running():
            try:
                yield stack
            finally:
                await stack.stop_sweeper()


@pytest.fixture
async def stack(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
) -> AsyncIterator[Stack]:
    async with _stack(redis_server, telegram, openai_server, bot) as built:
        yield built


async def test_an_english_customer_writing_english_reads_english(stack: Stack) -> None:
    en = stack.app.languages.texts("en")
    assert await stack.say("/start") == en.gettext(customer_texts.GREETING)
    assert en.gettext(customer_texts.GREETING).startswith("Hello!")

    assert await stack.say("Hello, where is my order?") == "Answer: Hello, where is my order?"
    told = instruction(stack.model.requests[-1].body)
    assert "на языке клиента: английский" in told
    assert "не цитируй их дословно" in told

    failure = await stack.say("this will fail")
    assert failure.startswith("I am overloaded right now")
    assert re.search(r"Incident code: [A-Z0-9]+\. Please quote it to support", failure)

    await stack.feed(stack.telegram.message_update(CHAT, "please cancel 8042", language_code="en"))
    await stack.telegram.wait_for(lambda: len(stack.telegram.keyboards(CHAT)) == 1)
    [(card_id, card_text, keyboard)] = stack.telegram.keyboards(CHAT)
    assert card_text.startswith("Cancel order 8042: ")
    assert card_text.endswith("The money will be back on your card within 5 days.")
    assert [button["text"] for button in keyboard[0]] == ["Confirm", "No, thanks"]
    await stack.press(card_id, keyboard[0][0]["callback_data"])
    await stack.telegram.wait_for(lambda: bool(stack.edits(card_id)))
    assert stack.edits(card_id) == ["✅ Order 8042 is cancelled"]
    await stack.telegram.wait_for(
        lambda: (
            "Order 8042 is cancelled. The money will be back on your card within 5 days."
            in stack.telegram.sent_texts(CHAT)
        )
    )

    stack.start_sweeper()
    await stack.telegram.wait_for(lambda: len(stack.telegram.keyboards(CHAT)) == 2)
    question_id, question, scores = stack.telegram.keyboards(CHAT)[1]
    assert question == "Did we help you? Please rate us from 1 to 5"
    await stack.press(question_id, scores[0][4]["callback_data"])
    await stack.telegram.wait_for(lambda: bool(stack.edits(question_id)))
    assert stack.edits(question_id) == ["Thank you for your rating!"]
    answers = [call.params.get("text") for call in stack.telegram.calls_of("answerCallbackQuery")]
    assert "Thank you for your rating!" in answers

    assert set(await stack.turn_languages()) == {"en"}


async def test_the_same_customer_writing_russian_reads_russian(stack: Stack) -> None:
    assert await stack.say("Здравствуйте, где мой заказ?") == "Answer: Здравствуйте, где мой заказ?"
    assert "на языке клиента: русский" in instruction(stack.model.requests[-1].body)
    # A command has no words of its own: the conversation's language, not Telegram's.
    assert await stack.say("/help") == customer_texts.HELP
    failure = await stack.say("а тут сбой")
    assert failure.startswith("Сейчас я перегружен и не успел ответить.")
    assert "Код обращения: " in failure

    await stack.feed(stack.telegram.message_update(CHAT, "отмените 8042", language_code="en"))
    await stack.telegram.wait_for(lambda: len(stack.telegram.keyboards(CHAT)) == 1)
    [(_card_id, card_text, keyboard)] = stack.telegram.keyboards(CHAT)
    assert card_text.startswith("Отменить заказ 8042: ")
    assert [button["text"] for button in keyboard[0]] == [
        customer_texts.CONFIRM_LABEL,
        customer_texts.DECLINE_LABEL,
    ]
    assert set(await stack.turn_languages()) == {"ru"}


async def test_language_command_lists_the_choices_and_fixes_one(stack: Stack) -> None:
    choices = await stack.say("/language", code="ru")
    assert choices.startswith("Выберите язык бота:")
    assert "/language en — English" in choices
    assert "/language ru — Русский" in choices
    assert (await stack.say("/language de", code="ru")).startswith("Такого языка у бота нет.")

    assert await stack.say("/language en", code="ru") == "OK, from now on I write in English."
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert (session.language, session.language_chosen) == ("en", True)

    # Chosen: Russian words and a Russian Telegram no longer change it.
    assert await stack.say("где мой заказ?", code="ru") == "Answer: где мой заказ?"
    assert "на языке клиента: английский" in instruction(stack.model.requests[-1].body)
    assert (await stack.say("/help", code="ru")).startswith("Commands:")

    assert await stack.say("/language ru", code="ru") == customer_texts.LANGUAGE_CHANGED
    assert await stack.say("/help", code="en") == customer_texts.HELP


async def test_a_voice_message_refused_is_refused_in_english(stack: Stack) -> None:
    en = stack.app.languages.texts("en")
    # Over VOICE_MAX_SECONDS: refused before any download, in Telegram's language (no words).
    recording = {"file_id": "long", "file_unique_id": "u-long", "duration": 3600}
    update = stack.telegram.message_update(CHAT, language_code="en", extra={"voice": recording})
    await stack.feed(update)
    [refusal] = await stack.telegram.wait_for_texts(CHAT, 1)
    assert refusal == en.gettext(customer_texts.VOICE_TOO_LONG)
    assert refusal.startswith("This voice message is too long for me.")


UPSET_EN = "This is terrible, where is my money? Urgent!"
ANGRY_EN = {
    "category": "payment",
    "sentiment": "negative",
    "urgency": "high",
    "language": "en",
    "resolved": False,
    "summary": "Клиент возмущён: списали деньги, заказа нет.",
    "next_step": "Проверить платёж.",
}


def respond_upset(body: Any) -> Reply:
    """As :func:`respond`; every analysis (a ``response_format`` request) angry and urgent."""
    if "response_format" in body:
        return text_answer(json.dumps(ANGRY_EN, ensure_ascii=False))
    return respond(body)


async def test_an_english_customer_is_offered_a_person_and_told_the_idle_note_in_english(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
) -> None:
    telegram.make_forum(STAFF)
    openai_server.responder = respond_upset
    settings = stack_settings(
        telegram,
        openai_server,
        redis_server.url,
        prefix=PREFIX,
        STREAMING="off",
        STAFF_CHAT_ID=STAFF,
        CSAT="off",
        # The sweeper ends the handoff once nobody wrote for 0.6 s.
        HANDOFF_IDLE_MINUTES=0.01,
        FLOOD_BURST=100,
    )
    async with open_application(settings) as app:
        stack = Stack(app, bot, telegram, openai_server)
        en = app.languages.texts("en")
        async with stack.running(sweep=True):
            assert await stack.say(UPSET_EN) == f"Answer: {UPSET_EN}"
            await telegram.wait_for(lambda: len(telegram.keyboards(CHAT)) == 1)
            [(offer_id, offer, keyboard)] = telegram.keyboards(CHAT)
            assert offer == en.gettext(customer_texts.ESCALATION_OFFER)
            assert offer.startswith("It looks like something went wrong")
            [[button]] = keyboard
            assert button["text"] == "Call a support agent"

            await stack.press(offer_id, button["callback_data"])
            await telegram.wait_for(lambda: bool(stack.edits(offer_id)))
            assert stack.edits(offer_id) == ["You asked for a support agent."]
            waiting = en.gettext(customer_texts.OPERATOR_WAITING)
            await telegram.wait_for(
                lambda: any(text.startswith(waiting) for text in telegram.sent_texts(CHAT))
            )

            idle_note = en.gettext(customer_texts.HANDOFF_IDLE_NOTE)
            assert idle_note.startswith("The conversation with the support agent has ended")
            await telegram.wait_for(lambda: idle_note in telegram.sent_texts(CHAT))
            assert customer_texts.HANDOFF_IDLE_NOTE not in telegram.sent_texts(CHAT)


async def test_operator_without_a_staff_group_names_the_hours_in_english(stack: Stack) -> None:
    en = stack.app.languages.texts("en")
    answer = await stack.say("/operator")
    assert answer.startswith(en.gettext(customer_texts.OPERATOR_OFF) + "\n\nSupport is ")
    assert "Schedule (" in answer
    assert "Monday: " in answer


async def test_a_russian_customer_naming_an_english_product_is_answered_in_russian(
    stack: Stack,
) -> None:
    """Both scripts in one message: the stored language (or Telegram's) stays, not English."""
    assert await stack.say("Где мой заказ с AirPods Pro Max?", code="ru") == (
        "Answer: Где мой заказ с AirPods Pro Max?"
    )
    assert "на языке клиента: русский" in instruction(stack.model.requests[-1].body)
    # Without Telegram's code, the language the conversation keeps decides.
    assert await stack.say("Не работает Samsung Galaxy Watch", code=None) == (
        "Answer: Не работает Samsung Galaxy Watch"
    )
    assert "на языке клиента: русский" in instruction(stack.model.requests[-1].body)
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert session.language == "ru"
    assert set(await stack.turn_languages()) == {"ru"}


async def test_language_command_takes_a_region_subtag(stack: Stack) -> None:
    assert await stack.say("/language en-US", code="ru") == "OK, from now on I write in English."
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert (session.language, session.language_chosen) == ("en", True)
    # A region of a language the bot does not have is still refused (in the chosen language).
    assert (await stack.say("/language pt-BR", code="ru")).startswith(
        "The bot has no such language."
    )
