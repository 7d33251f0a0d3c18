"""Handlers and middlewares through the real dispatcher, replies over HTTP to the fake Bot API.

The chat service is a stub here (what matters is what the front end does with
a reply or a failure); Redis is real. The engine behind the handlers is tested
end to end in ``test_e2e_polling``.
"""

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiogram import Bot
from aiogram.types import Update

from bot import chat_errors
from bot.redis_connection import AsyncRedisClient
from bot.telegram import messages
from bot.telegram.dispatcher import TelegramFrontEnd, build_dispatcher
from tests.fakes.telegram_server import FakeTelegramServer
from tests.telegram.support import StubChat, make_settings


@pytest.fixture
def redis_client(storage_client: AsyncRedisClient) -> AsyncRedisClient:
    """The factory's client, once on standalone Redis and once on the cluster."""
    return storage_client


CHAT = 700


@pytest.fixture
def stub() -> StubChat:
    return StubChat()


def _front(stub: StubChat, redis_client: aioredis.Redis, **env: Any) -> TelegramFrontEnd:
    return build_dispatcher(
        make_settings(REDIS_KEY_PREFIX="tg", **env), chat_service=stub, redis=redis_client
    )


@pytest.fixture
def front(stub: StubChat, redis_client: aioredis.Redis) -> TelegramFrontEnd:
    return _front(stub, redis_client)


async def feed(front: TelegramFrontEnd, bot: Bot, update: dict[str, Any]) -> None:
    await front.dispatcher.feed_update(bot, Update.model_validate(update, context={"bot": bot}))


async def test_start_greets_in_russian_and_help_lists_commands(
    front: TelegramFrontEnd, bot: Bot, telegram: FakeTelegramServer, stub: StubChat
) -> None:
    await feed(front, bot, telegram.message_update(CHAT, "/start"))
    await feed(front, bot, telegram.message_update(CHAT, "/help"))
    await feed(front, bot, telegram.message_update(CHAT, "/unknown"))
    assert telegram.sent_texts(CHAT) == [messages.GREETING, messages.HELP, messages.HELP]
    assert stub.asked == []


async def test_new_resets_the_conversation(
    front: TelegramFrontEnd, bot: Bot, telegram: FakeTelegramServer, stub: StubChat
) -> None:
    await feed(front, bot, telegram.message_update(CHAT, "/new"))
    assert stub.resets == [f"tg:{CHAT}"]
    assert telegram.sent_texts(CHAT) == [messages.NEW_CONVERSATION]


async def test_text_gets_the_answer_with_typing_indicator_first(
    front: TelegramFrontEnd, bot: Bot, telegram: FakeTelegramServer, stub: StubChat
) -> None:
    release = asyncio.Event()
    stub.gates["Где заказ 1234?"] = release
    turn = asyncio.create_task(
        feed(front, bot, telegram.message_update(CHAT, "Где заказ 1234?", user_id=42))
    )
    # While the turn runs the customer sees "typing", and no answer yet.
    await telegram.wait_for(lambda: bool(telegram.calls_of("sendChatAction")))
    assert telegram.calls_of("sendChatAction")[0].params["action"] == "typing"
    assert telegram.sent_texts(CHAT) == []
    release.set()
    await turn
    assert telegram.sent_texts(CHAT) == ["Ответ на: Где заказ 1234?"]
    ((key, _, context),) = stub.asked
    assert key == f"tg:{CHAT}"
    assert (context.chat_id, context.user_id, len(context.turn_id)) == (CHAT, 42, 10)


@pytest.mark.parametrize(
    "extra",
    [
        {"photo": [{"file_id": "p", "file_unique_id": "u", "width": 90, "height": 90}]},
        {"location": {"latitude": 55.75, "longitude": 37.62}},
        {
            "sticker": {
                "file_id": "s",
                "file_unique_id": "u",
                "type": "regular",
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
            }
        },
        {"voice": {"file_id": "v", "file_unique_id": "u", "duration": 3}},
    ],
    ids=["photo", "location", "sticker", "voice"],
)
async def test_non_text_gets_a_short_reply_without_a_model_call(
    front: TelegramFrontEnd, bot: Bot, telegram: FakeTelegramServer, stub: StubChat, extra
) -> None:
    await feed(front, bot, telegram.message_update(CHAT, None, extra=extra))
    assert telegram.sent_texts(CHAT) == [messages.NON_TEXT]
    assert stub.asked == []


async def test_edited_messages_and_channel_posts_are_ignored(
    front: TelegramFrontEnd, bot: Bot, telegram: FakeTelegramServer, stub: StubChat
) -> None:
    message = telegram.message_update(CHAT, "исправлено")["message"]
    await feed(front, bot, {"update_id": 1, "edited_message": {**message, "edit_date": 1}})
    post = {**message, "chat": {"id": -100500, "type": "channel", "title": "Канал"}}
    post.pop("from")
    await feed(front, bot, {"update_id": 2, "channel_post": post})
    assert telegram.sent_texts() == []
    assert stub.asked == []
    assert "edited_message" not in front.dispatcher.resolve_used_update_types()


async def test_groups_are_ignored_by_default(
    front: TelegramFrontEnd, bot: Bot, telegram: FakeTelegramServer, stub: StubChat
) -> None:
    text = f"@{telegram.bot_username} где заказ 1234?"
    update = telegram.message_update(-300, text, user_id=5, chat_type="supergroup")
    update["message"]["entities"] = [{"type": "mention", "offset": 0, "length": 17}]
    await feed(front, bot, update)
    assert stub.asked == []
    assert telegram.sent_texts() == []


async def test_allowed_groups_answer_only_when_addressed(
    stub: StubChat, redis_client: aioredis.Redis, bot: Bot, telegram: FakeTelegramServer
) -> None:
    front = _front(stub, redis_client, TELEGRAM_ALLOW_GROUPS=True)
    await feed(
        front, bot, telegram.message_update(-300, "просто болтаем", user_id=5, chat_type="group")
    )
    mention = f"@{telegram.bot_username}"
    update = telegram.message_update(
        -300, f"{mention} где заказ 1234?", user_id=5, chat_type="group"
    )
    update["message"]["entities"] = [{"type": "mention", "offset": 0, "length": len(mention)}]
    await feed(front, bot, update)
    assert [text for _, text, _ in stub.asked] == ["где заказ 1234?"]
    assert telegram.sent_texts(-300) == ["Ответ на: где заказ 1234?"]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (chat_errors.ChatModelUnavailableError("timeout after 30s", "T1"), "повторите"),
        (chat_errors.ChatStorageError("ConnectionError: redis", "T1"), "временно недоступен"),
        (chat_errors.MessageTooLongError("too long", "T1"), "слишком длинное"),
        (chat_errors.ChatLimitError("ToolLoopLimitError", "T1"), "несколько простых"),
    ],
)
async def test_failed_turn_gets_a_kind_message_with_the_turn_id(  # noqa: PLR0917 - fixtures
    front: TelegramFrontEnd,
    bot: Bot,
    telegram: FakeTelegramServer,
    stub: StubChat,
    error: chat_errors.ChatServiceError,
    expected: str,
) -> None:
    stub.failure = error
    await feed(front, bot, telegram.message_update(CHAT, "вопрос"))
    (text,) = telegram.sent_texts(CHAT)
    turn_id = stub.asked[0][2].turn_id
    assert expected in text
    assert f"Код обращения: {turn_id}" in text
    assert str(error) not in text


async def test_unexpected_exception_never_reaches_the_customer(
    front: TelegramFrontEnd, bot: Bot, telegram: FakeTelegramServer, stub: StubChat
) -> None:
    stub.failure = KeyError("internal secret detail")
    await feed(front, bot, telegram.message_update(CHAT, "вопрос"))
    (text,) = telegram.sent_texts(CHAT)
    assert "internal secret detail" not in text
    assert "KeyError" not in text
    assert f"Код обращения: {stub.asked[0][2].turn_id}" in text


async def test_new_failing_gets_an_incident_code(
    front: TelegramFrontEnd, bot: Bot, telegram: FakeTelegramServer, stub: StubChat
) -> None:
    stub.failure = chat_errors.ChatStorageError("session storage is unavailable")
    await feed(front, bot, telegram.message_update(CHAT, "/new"))
    (text,) = telegram.sent_texts(CHAT)
    assert "временно недоступен" in text
    assert "Код обращения: " in text
    assert "storage" not in text


async def test_a_redelivered_update_is_handled_once(
    front: TelegramFrontEnd,
    bot: Bot,
    telegram: FakeTelegramServer,
    stub: StubChat,
    redis_client: aioredis.Redis,
) -> None:
    update = telegram.message_update(CHAT, "вопрос", update_id=77)
    await feed(front, bot, update)
    await feed(front, bot, update)
    assert len(stub.asked) == 1
    assert len(telegram.sent_texts(CHAT)) == 1
    assert 0 < await redis_client.ttl("tg:update:77") <= 24 * 3600


async def test_flood_is_told_once_and_costs_no_model_call(
    stub: StubChat, redis_client: aioredis.Redis, bot: Bot, telegram: FakeTelegramServer
) -> None:
    front = _front(stub, redis_client, FLOOD_BURST=2, FLOOD_INTERVAL_SECONDS=600)
    for number in range(4):
        await feed(front, bot, telegram.message_update(CHAT, f"вопрос {number}"))
    assert [text for _, text, _ in stub.asked] == ["вопрос 0", "вопрос 1"]
    assert telegram.sent_texts(CHAT) == [
        "Ответ на: вопрос 0",
        "Ответ на: вопрос 1",
        messages.RATE_LIMITED,
    ]


async def test_daily_cap_is_told_once_and_commands_still_work(
    stub: StubChat, redis_client: aioredis.Redis, bot: Bot, telegram: FakeTelegramServer
) -> None:
    front = _front(stub, redis_client, DAILY_TURN_LIMIT=1)
    for text in ("первый", "второй", "третий", "/help"):
        await feed(front, bot, telegram.message_update(CHAT, text))
    assert [text for _, text, _ in stub.asked] == ["первый"]
    assert telegram.sent_texts(CHAT) == ["Ответ на: первый", messages.DAILY_LIMIT, messages.HELP]


async def test_one_chat_in_order_while_another_chat_is_not_delayed(
    front: TelegramFrontEnd, bot: Bot, telegram: FakeTelegramServer, stub: StubChat
) -> None:
    """A stuck turn of chat A holds A's later messages back, but chat B is answered meanwhile."""
    release = asyncio.Event()
    stub.gates["A0"] = release
    updates = [telegram.message_update(1, f"A{i}") for i in range(3)]
    updates.insert(1, telegram.message_update(2, "B0"))
    tasks = [asyncio.create_task(feed(front, bot, update)) for update in updates]
    await telegram.wait_for_texts(2, 1)  # B answered while A0 is still stuck
    assert [text for _, text, _ in stub.asked if text.startswith("A")] == ["A0"]
    release.set()
    await asyncio.gather(*tasks)
    assert telegram.sent_texts(1) == ["Ответ на: A0", "Ответ на: A1", "Ответ на: A2"]
    assert front.in_flight.in_flight == 0
