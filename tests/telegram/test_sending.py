"""Sending replies over real HTTP: 429 waits and retries once delivered, formatting falls back."""

import pytest
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import TelegramBadRequest, TelegramNetworkError, TelegramRetryAfter
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from bot.telegram.sending import ReplyNotDeliveredError, ReplySender
from bot.testing.redis_server import free_port
from bot.testing.telegram_server import FakeTelegramServer

CHAT = 501


class RecordingSleep:
    """Records the waits the sender asks for instead of spending them."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


def _sender(sleep: RecordingSleep, attempts: int = 5) -> ReplySender:
    return ReplySender(max_attempts=attempts, sleep=sleep)


async def test_retry_after_is_waited_and_the_message_delivered_once(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    telegram.fail_next(
        "sendMessage", 429, "Too Many Requests: retry after 3", retry_after=3, times=2
    )
    await _sender(sleep).send_answer(bot, CHAT, "Заказ 1234 в пути.")
    assert sleep.waits == [3.0, 3.0]
    assert [call.status for call in telegram.calls_of("sendMessage")] == [429, 429, 200]
    assert telegram.sent_texts(CHAT) == ["Заказ 1234 в пути."]


async def test_server_errors_are_retried_with_backoff(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    telegram.fail_next("sendMessage", 502, "Bad Gateway", times=2)
    await _sender(sleep).send_plain(bot, CHAT, "Ответ")
    assert sleep.waits == [0.5, 1.0]
    assert telegram.sent_texts(CHAT) == ["Ответ"]


async def test_attempts_are_bounded(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    telegram.fail_next("sendMessage", 429, "Too Many Requests", retry_after=1, times=10)
    with pytest.raises(ReplyNotDeliveredError):
        await _sender(sleep, attempts=3).send_plain(bot, CHAT, "Ответ")
    assert len(telegram.calls_of("sendMessage")) == 3
    assert telegram.sent_texts(CHAT) == []


async def test_a_retry_after_beyond_the_cap_is_not_waited(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    telegram.fail_next("sendMessage", 429, "Too Many Requests", retry_after=3600)
    with pytest.raises(ReplyNotDeliveredError):
        await _sender(sleep).send_plain(bot, CHAT, "Ответ")
    assert sleep.waits == []


async def test_formatting_rejected_by_telegram_is_resent_as_plain_text(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    telegram.fail_next(
        "sendMessage",
        400,
        "Bad Request: can't parse entities: unsupported start tag",
        when=lambda params: bool(params.get("entities")),
    )
    await _sender(sleep).send_answer(bot, CHAT, "Заказ **1234** в пути.")
    first, second = telegram.calls_of("sendMessage")
    assert first.params.get("entities")
    assert first.status == 400
    assert "entities" not in second.params
    assert second.ok
    assert telegram.sent_texts(CHAT) == ["Заказ 1234 в пути."]


async def test_markdown_answer_is_sent_with_entities(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    await _sender(sleep).send_answer(bot, CHAT, "Заказ **1234** в пути.")
    (call,) = telegram.calls_of("sendMessage")
    assert call.ok
    assert call.params["text"] == "Заказ 1234 в пути."
    assert call.params["entities"] == [{"type": "bold", "offset": 6, "length": 4}]


async def test_plain_bad_request_is_not_retried(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    telegram.fail_next("sendMessage", 400, "Bad Request: chat not found")
    with pytest.raises(ReplyNotDeliveredError):
        await _sender(sleep).send_plain(bot, CHAT, "Ответ")
    assert len(telegram.calls_of("sendMessage")) == 1


async def test_long_answer_goes_as_several_valid_messages(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    paragraph = ("Это **важное** предложение ответа. " * 30).strip()
    answer = "\n\n".join([paragraph] * 10)
    sent = await _sender(sleep).send_answer(bot, CHAT, answer)
    calls = telegram.calls_of("sendMessage")
    assert sent == len(calls) >= 3
    assert all(call.ok for call in calls)  # the fake refuses >4096 units and stray entities
    assert "".join(telegram.sent_texts(CHAT)).count("важное") == 300


async def test_unreachable_api_is_retried_then_reported(bot: Bot, sleep: RecordingSleep) -> None:
    """A connection that never opened cannot have delivered anything: it is retried."""
    unreachable = ReplySender(max_attempts=2, sleep=sleep)
    await bot.session.close()
    bot.session = AiohttpSession(api=TelegramAPIServer.from_base(f"http://127.0.0.1:{free_port()}"))
    with pytest.raises(ReplyNotDeliveredError):
        await unreachable.send_plain(bot, CHAT, "Ответ")
    assert sleep.waits == [0.5]


async def test_an_edit_is_retried_and_an_edit_found_done_counts_as_done(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    sender = _sender(sleep)
    message_id = await sender.send_with_buttons(bot, CHAT, "Карточка", _buttons())
    telegram.fail_next("editMessageText", 502, "Bad Gateway")

    assert await sender.edit_text(bot, CHAT, message_id, "Готово")
    # Delivered again after a crash: Telegram finds nothing to change, and that is done.
    assert await sender.edit_text(bot, CHAT, message_id, "Готово")

    assert [call.status for call in telegram.calls_of("editMessageText")] == [502, 200, 400]
    assert sleep.waits == [0.5]
    assert not await sender.edit_text(bot, CHAT, message_id + 1000, "Нет такого")


def _buttons() -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        inline_keyboard=[[InlineKeyboardButton(text="Да", callback_data="x")]]
    )


async def test_any_call_gets_the_same_retries_and_keeps_telegrams_own_errors(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    telegram.fail_next("sendMessage", 429, "Too Many Requests: retry after 2", retry_after=2)
    message = await _sender(sleep).call(CHAT, lambda: bot.send_message(CHAT, "Тема"))
    assert sleep.waits == [2.0]
    assert [call.status for call in telegram.calls_of("sendMessage")] == [429, 200]
    assert telegram.sent_texts(CHAT) == ["Тема"]
    assert message.text == "Тема"

    # A refusal is not retried and stays Telegram's, so a caller can tell it apart.
    telegram.fail_next("sendMessage", 400, "Bad Request: message thread not found")
    with pytest.raises(TelegramBadRequest, match="thread not found"):
        await _sender(sleep).call(CHAT, lambda: bot.send_message(CHAT, "Снова"))
    # Bounded: the last 429 is raised once the attempts are used up.
    telegram.fail_next("sendMessage", 429, "Too Many Requests", retry_after=1, times=10)
    with pytest.raises(TelegramRetryAfter):
        await _sender(sleep, attempts=2).call(CHAT, lambda: bot.send_message(CHAT, "Ещё"))
    assert telegram.sent_texts(CHAT) == ["Тема"]


async def test_a_timeout_is_retried_only_where_a_second_call_changes_nothing(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    """One rule for sends and other calls: a call that may have reached Telegram is not repeated.

    The fake holds the sends to the chat, so each request times out on the bot's side.
    """
    telegram.hold_sends(CHAT)
    bot.session.timeout = 0.2
    sender = _sender(sleep, attempts=2)

    with pytest.raises(ReplyNotDeliveredError, match="delivery uncertain"):
        await sender.send_plain(bot, CHAT, "Ответ")
    with pytest.raises(TelegramNetworkError):
        await sender.call(CHAT, lambda: bot.send_message(CHAT, "Тема"))
    await telegram.wait_for(lambda: telegram.received("sendMessage") == 2)
    assert sleep.waits == []

    # Repeatable (an edit-like call): the timeout is retried, within the same bound.
    with pytest.raises(TelegramNetworkError):
        await sender.call(CHAT, lambda: bot.send_message(CHAT, "Снова"), repeatable=True)
    await telegram.wait_for(lambda: telegram.received("sendMessage") == 4)
    assert sleep.waits == [0.5]
    await telegram.release_sends(CHAT)


async def test_any_call_refuses_a_retry_after_beyond_the_cap_without_waiting(
    telegram: FakeTelegramServer, bot: Bot, sleep: RecordingSleep
) -> None:
    telegram.fail_next("sendMessage", 429, "Too Many Requests", retry_after=3600)
    with pytest.raises(TelegramRetryAfter):
        await _sender(sleep).call(CHAT, lambda: bot.send_message(CHAT, "Тема"))
    assert sleep.waits == []
    assert telegram.sent_texts(CHAT) == []
