"""Handlers through the real pipeline: intake, the chat's queue, a worker, the dispatcher.

Updates are accepted by the real intake (de-duplication, flood control, the
chat's queue in a real redis-server); a worker of this test's event loop runs
them through the real dispatcher and the real ``ChatService`` (over a
scripted model client), and replies reach the fake Bot API over HTTP. A thin
wrapper around the chat service records what handlers asked and can hold a
turn back or make it fail, so the front end's side can be checked exactly.
"""

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from aiogram import Bot

from bot import chat_errors, customer_texts
from bot.app import Application
from bot.engine.chat_service import ChatReply, ChatService
from bot.engine.reply_stream import ReplyStream
from bot.queue.delivery import Reply
from bot.queue.job_results import JobContext, JobDone
from bot.queue.staff_actions import HandoffTurn
from bot.sessions.models import ConversationSession
from bot.testing.audit_entries import stream_entries
from bot.testing.redis_cluster import RedisClusterProcesses
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, echo_responder
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from turn import TEXT_INPUT, TurnContext, TurnInput, TurnOutcome


@pytest.fixture(params=["standalone", "cluster"])
def storage(request: pytest.FixtureRequest, redis_server: RedisServer) -> dict[str, str]:
    """Where the bot keeps its data: standalone Redis, then the cluster.

    For the tests whose claim is about what Redis keeps (sessions, de-duplication,
    flood and daily counters, the blocked flag, each chat's queue and lease).
    """
    if request.param == "standalone":
        return {"REDIS_URL": redis_server.url}
    cluster: RedisClusterProcesses = request.getfixturevalue("redis_cluster")
    return {"REDIS_MODE": "cluster", "REDIS_URL": cluster.url}


@pytest.fixture
def standalone(redis_server: RedisServer) -> dict[str, str]:
    """The shared standalone redis-server, for claims about handlers alone."""
    return {"REDIS_URL": redis_server.url}


CHAT = 700


@dataclass
class RecordingChat:
    """The real chat service, watched: records turns and resets; can hold or fail them."""

    inner: Any
    failure: BaseException | None = None
    asked: list[tuple[TurnContext, str]] = field(default_factory=list)
    resets: list[str] = field(default_factory=list)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)

    async def reply(
        self,
        context: TurnContext,
        text: str,
        *,
        held: JobContext,
        customer: HandoffTurn | None = None,
        stream: ReplyStream | None = None,
        turn_input: TurnInput = TEXT_INPUT,
    ) -> ChatReply:
        self.asked.append((context, text))
        gate = self.gates.get(text)
        if gate is not None:
            await gate.wait()
        if self.failure is not None:
            raise self.failure
        reply: ChatReply = await self.inner.reply(
            context, text, held=held, customer=customer, stream=stream, turn_input=turn_input
        )
        return reply

    async def reset(self, conversation_key: str, *, token: str) -> None:
        if self.failure is not None:
            raise self.failure
        self.resets.append(conversation_key)
        await self.inner.reset(conversation_key, token=token)

    async def summarise(self, conversation_key: str, *, token: str) -> None:
        await self.inner.summarise(conversation_key, token=token)

    async def mark_undelivered(self, conversation_key: str, token: str, turn_id: str) -> None:
        await self.inner.mark_undelivered(conversation_key, token, turn_id)

    async def commit_without_turn(
        self,
        conversation_key: str,
        held: JobContext,
        change: Callable[[ConversationSession], ConversationSession],
        reply: Reply,
    ) -> JobDone:
        done: JobDone = await self.inner.commit_without_turn(conversation_key, held, change, reply)
        return done


class Stack(TelegramStack):
    """The Telegram side over a real Redis, its chat service watched; ``feed`` only queues."""

    def __init__(self, app: Application, bot: Bot, telegram: FakeTelegramServer) -> None:
        self.chat = RecordingChat(app.chat)
        # A stand-in that forwards every call the handlers make to the real service.
        super().__init__(app, bot, telegram=telegram, chat=cast(ChatService, self.chat))

    async def settle(self, chat_id: int = CHAT) -> None:
        """Wait until every update queued so far in ``chat_id`` was handled (a /help barrier)."""
        await super().settle(chat_id)


async def _stack(
    redis: dict[str, str], telegram: FakeTelegramServer, bot: Bot, **env: Any
) -> AsyncIterator[Stack]:
    settings = make_settings(
        **redis,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_KEY_PREFIX="handlers",
        AUDIT_STREAM="handlers:audit",
        SESSION_LEASE_SECONDS=3,
        **env,
    )
    async with open_application(settings, llm=ScriptedClient(echo_responder)) as app:
        stack = Stack(app, bot, telegram)
        async with stack.running():
            yield stack


@pytest.fixture
async def stack(
    standalone: dict[str, str], telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    async for built in _stack(standalone, telegram, bot):
        yield built


@pytest.fixture
async def stored_stack(
    storage: dict[str, str], telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    """The stack on standalone Redis and on the cluster."""
    async for built in _stack(storage, telegram, bot):
        yield built


@pytest.fixture
async def typing_stack(
    standalone: dict[str, str], telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    """The stack without drafts (``STREAMING=off``): private chats get "typing" instead."""
    async for built in _stack(standalone, telegram, bot, STREAMING="off"):
        yield built


async def test_start_greets_in_russian_and_help_lists_commands(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    for text in ("/start", "/help", "/unknown"):
        await stack.feed(telegram.message_update(CHAT, text))
    assert await telegram.wait_for_texts(CHAT, 3) == [
        customer_texts.GREETING,
        customer_texts.HELP,
        customer_texts.HELP,
    ]
    assert stack.chat.asked == []


async def test_new_resets_the_conversation(
    stored_stack: Stack, telegram: FakeTelegramServer
) -> None:
    await stored_stack.feed(telegram.message_update(CHAT, "первый вопрос"))
    await stored_stack.feed(telegram.message_update(CHAT, "/new"))
    await stored_stack.feed(telegram.message_update(CHAT, "второй вопрос"))
    assert await telegram.wait_for_texts(CHAT, 3) == [
        "Ответ: первый вопрос",
        customer_texts.NEW_CONVERSATION,
        "Ответ: второй вопрос",
    ]
    assert stored_stack.chat.resets == [f"tg:{CHAT}"]
    session = await stored_stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert [m.content for m in session.messages] == ["второй вопрос", "Ответ: второй вопрос"]


async def test_text_gets_the_answer_with_typing_indicator_first(
    typing_stack: Stack, telegram: FakeTelegramServer
) -> None:
    release = asyncio.Event()
    typing_stack.chat.gates["Где заказ 1234?"] = release
    await typing_stack.feed(telegram.message_update(CHAT, "Где заказ 1234?", user_id=42))
    # A turn slower than the typing delay shows "typing", and no answer yet.
    await telegram.wait_for(lambda: bool(telegram.calls_of("sendChatAction")))
    assert telegram.calls_of("sendChatAction")[0].params["action"] == "typing"
    assert telegram.sent_texts(CHAT) == []
    release.set()
    assert await telegram.wait_for_texts(CHAT, 1) == ["Ответ: Где заказ 1234?"]
    ((context, _),) = typing_stack.chat.asked
    assert context.conversation_key == f"tg:{CHAT}"
    assert (context.chat_id, context.user_id, len(context.turn_id)) == (CHAT, 42, 10)


async def test_a_quick_answer_sends_no_typing_indicator(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    await stack.feed(telegram.message_update(CHAT, "быстрый вопрос"))
    assert await telegram.wait_for_texts(CHAT, 1) == ["Ответ: быстрый вопрос"]
    assert telegram.calls_of("sendChatAction") == []


async def test_a_refused_typing_indicator_stops_quietly_and_the_answer_still_comes(
    typing_stack: Stack, telegram: FakeTelegramServer, caplog: pytest.LogCaptureFixture
) -> None:
    telegram.fail_next("sendChatAction", 400, "Bad Request: chat not found")
    release = asyncio.Event()
    typing_stack.chat.gates["медленный вопрос"] = release
    with caplog.at_level(logging.INFO, logger="bot.telegram.typing_indicator"):
        await typing_stack.feed(telegram.message_update(CHAT, "медленный вопрос"))
        await telegram.wait_for(lambda: bool(telegram.calls_of("sendChatAction")))
        release.set()
        assert await telegram.wait_for_texts(CHAT, 1) == ["Ответ: медленный вопрос"]
    assert "Typing indicator stopped: TelegramBadRequest" in caplog.text


_STICKER = {
    "file_id": "s",
    "file_unique_id": "u",
    "type": "regular",
    "width": 512,
    "height": 512,
    "is_animated": False,
    "is_video": False,
}
_CHANNEL = {"id": -100777, "type": "channel", "title": "Новости магазина"}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"sticker": _STICKER}, customer_texts.STICKER),
        ({"location": {"latitude": 55.75, "longitude": 37.62}}, customer_texts.LOCATION),
        (
            {"contact": {"phone_number": "+79990001122", "first_name": "Мама", "user_id": 5}},
            customer_texts.CONTACT,
        ),
        (
            {
                "poll": {
                    "id": "1",
                    "question": "Какой цвет?",
                    "options": [
                        {"text": "красный", "voter_count": 0, "persistent_id": "a"},
                        {"text": "синий", "voter_count": 0, "persistent_id": "b"},
                    ],
                    "total_voter_count": 0,
                    "is_closed": False,
                    "is_anonymous": True,
                    "type": "regular",
                    "allows_multiple_answers": False,
                    "allows_revoting": False,
                    "members_only": False,
                }
            },
            customer_texts.POLL,
        ),
        (
            {
                "document": {
                    "file_id": "d",
                    "file_unique_id": "u",
                    "file_name": "счёт.pdf",
                    "mime_type": "application/pdf",
                }
            },
            customer_texts.DOCUMENT,
        ),
        (
            {
                "video": {
                    "file_id": "v",
                    "file_unique_id": "u",
                    "width": 640,
                    "height": 480,
                    "duration": 5,
                }
            },
            customer_texts.VIDEO,
        ),
        (
            {
                "text": "Скидки до 50% на всё!",
                "forward_origin": {
                    "type": "channel",
                    "date": 1_700_000_000,
                    "chat": _CHANNEL,
                    "message_id": 9,
                },
            },
            customer_texts.FORWARDED_POST,
        ),
        ({"dice": {"emoji": "🎲", "value": 3}}, customer_texts.STICKER),
        ({}, customer_texts.NON_TEXT),
    ],
    ids=["sticker", "location", "contact", "poll", "document", "video", "forward", "dice", "empty"],
)
async def test_what_the_bot_does_not_read_gets_one_fitting_line_without_a_model_call(
    stack: Stack, telegram: FakeTelegramServer, extra: dict[str, Any], expected: str
) -> None:
    await stack.feed(telegram.message_update(CHAT, None, extra=extra))
    assert await telegram.wait_for_texts(CHAT, 1) == [expected]
    assert stack.chat.asked == []
    # Never a failed turn: nothing in the audit says so.
    await stack.settle()
    entries = await stream_entries(stack.app.redis, "handlers:audit")
    assert [entry for entry in entries if entry.get("outcome") not in (None, "answered")] == []


async def test_edited_messages_and_channel_posts_are_ignored(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    message = telegram.message_update(CHAT, "исправлено")["message"]
    await stack.feed({"update_id": 1, "edited_message": {**message, "edit_date": 1}})
    post = {**message, "chat": {"id": -100500, "type": "channel", "title": "Канал"}}
    post.pop("from")
    await stack.feed({"update_id": 2, "channel_post": post})
    await stack.settle()
    assert telegram.sent_texts() == [customer_texts.HELP]
    assert stack.chat.asked == []
    assert "edited_message" not in stack.side.front.dispatcher.resolve_used_update_types()


async def test_groups_are_ignored_by_default(
    stored_stack: Stack, telegram: FakeTelegramServer
) -> None:
    text = f"@{telegram.bot_username} где заказ 1234?"
    update = telegram.message_update(-300, text, user_id=5, chat_type="supergroup")
    update["message"]["entities"] = [{"type": "mention", "offset": 0, "length": 17}]
    await stored_stack.feed(update)
    await stored_stack.settle()
    assert stored_stack.chat.asked == []
    assert telegram.sent_texts(-300) == []
    assert await stored_stack.app.redis.keys("handlers:{tg:-300}*") == []


async def test_allowed_groups_answer_only_when_addressed(
    standalone: dict[str, str], telegram: FakeTelegramServer, bot: Bot
) -> None:
    async for stack in _stack(standalone, telegram, bot, TELEGRAM_ALLOW_GROUPS=True):
        await stack.feed(
            telegram.message_update(-300, "просто болтаем", user_id=5, chat_type="group")
        )
        mention = f"@{telegram.bot_username}"
        update = telegram.message_update(
            -300, f"{mention} где заказ 1234?", user_id=5, chat_type="group"
        )
        update["message"]["entities"] = [{"type": "mention", "offset": 0, "length": len(mention)}]
        await stack.feed(update)
        assert await telegram.wait_for_texts(-300, 1) == ["Ответ: где заказ 1234?"]
        assert [text for _, text in stack.chat.asked] == ["где заказ 1234?"]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            chat_errors.ChatServiceError("timeout after 30s", "T1", TurnOutcome.MODEL_UNAVAILABLE),
            "повторите",
        ),
        (chat_errors.ChatStorageError("ConnectionError: redis", "T1"), "временно недоступен"),
        (chat_errors.MessageTooLongError("too long", "T1"), "слишком длинное"),
        (
            chat_errors.ChatServiceError("ToolLoopLimitError", "T1", TurnOutcome.LIMIT),
            "несколько простых",
        ),
    ],
)
async def test_failed_turn_gets_a_kind_message_with_the_turn_id(
    stack: Stack,
    telegram: FakeTelegramServer,
    error: chat_errors.ChatServiceError,
    expected: str,
) -> None:
    stack.chat.failure = error
    await stack.feed(telegram.message_update(CHAT, "вопрос"))
    (text,) = await telegram.wait_for_texts(CHAT, 1)
    assert expected in text
    # The incident code is the turn's own id (derived from the update), found in the audit.
    assert f"Код обращения: {stack.chat.asked[0][0].turn_id}" in text
    assert str(error) not in text


async def test_unexpected_exception_never_reaches_the_customer(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    stack.chat.failure = KeyError("internal secret detail")
    await stack.feed(telegram.message_update(CHAT, "вопрос"))
    (text,) = await telegram.wait_for_texts(CHAT, 1)
    assert "internal secret detail" not in text
    assert "KeyError" not in text
    assert f"Код обращения: {stack.chat.asked[0][0].turn_id}" in text


async def test_new_failing_gets_an_incident_code(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    stack.chat.failure = chat_errors.ChatStorageError("session storage is unavailable")
    await stack.feed(telegram.message_update(CHAT, "/new"))
    (text,) = await telegram.wait_for_texts(CHAT, 1)
    assert "временно недоступен" in text
    assert "Код обращения: " in text
    assert "storage" not in text


async def test_a_redelivered_update_is_handled_once(
    stored_stack: Stack, telegram: FakeTelegramServer
) -> None:
    update = telegram.message_update(CHAT, "вопрос", update_id=77)
    await stored_stack.feed(update)
    await stored_stack.feed(update)
    await stored_stack.settle()
    assert telegram.sent_texts(CHAT) == ["Ответ: вопрос", customer_texts.HELP]
    assert len(stored_stack.chat.asked) == 1
    seen = f"handlers:{{tg:{CHAT}}}:seen:77"
    assert 0 < await stored_stack.app.redis.ttl(seen) <= 24 * 3600


async def test_flood_is_told_once_and_costs_no_model_call(
    storage: dict[str, str], telegram: FakeTelegramServer, bot: Bot
) -> None:
    async for stack in _stack(storage, telegram, bot, FLOOD_BURST=2, FLOOD_INTERVAL_SECONDS=600):
        for number in range(4):
            await stack.feed(telegram.message_update(CHAT, f"вопрос {number}"))
        assert await telegram.wait_for_texts(CHAT, 3) == [
            "Ответ: вопрос 0",
            "Ответ: вопрос 1",
            customer_texts.RATE_LIMITED,
        ]
        assert [text for _, text in stack.chat.asked] == ["вопрос 0", "вопрос 1"]


async def test_daily_cap_is_told_once_and_commands_still_work(
    storage: dict[str, str], telegram: FakeTelegramServer, bot: Bot
) -> None:
    async for stack in _stack(storage, telegram, bot, DAILY_TURN_LIMIT=1):
        for text in ("первый", "второй", "третий", "/help"):
            await stack.feed(telegram.message_update(CHAT, text))
        assert await telegram.wait_for_texts(CHAT, 3) == [
            "Ответ: первый",
            customer_texts.DAILY_LIMIT,
            customer_texts.HELP,
        ]
        assert [text for _, text in stack.chat.asked] == ["первый"]


async def test_one_chat_in_order_while_another_chat_is_not_delayed(
    stored_stack: Stack, telegram: FakeTelegramServer
) -> None:
    """A stuck turn of chat A holds A's later messages back, but chat B is answered meanwhile."""
    release = asyncio.Event()
    stored_stack.chat.gates["A0"] = release
    updates = [telegram.message_update(1, f"A{i}") for i in range(3)]
    updates.insert(1, telegram.message_update(2, "B0"))
    for update in updates:
        await stored_stack.feed(update)
    await telegram.wait_for_texts(2, 1)  # B answered while A0 is still stuck
    assert [text for _, text in stored_stack.chat.asked if text.startswith("A")] == ["A0"]
    release.set()
    assert await telegram.wait_for_texts(1, 3) == ["Ответ: A0", "Ответ: A1", "Ответ: A2"]


async def test_a_command_addressed_to_another_bot_in_a_group_is_not_ours(
    standalone: dict[str, str], telegram: FakeTelegramServer, bot: Bot
) -> None:
    async for stack in _stack(standalone, telegram, bot, TELEGRAM_ALLOW_GROUPS=True):
        for text in ("/help@otherbot", "/new@OtherBot", "/start@other_bot привет"):
            await stack.feed(telegram.message_update(-300, text, user_id=5, chat_type="group"))
        # Addressed to us, or to nobody in particular, it is ours.
        ours = f"/help@{telegram.bot_username.upper()}"
        await stack.feed(telegram.message_update(-300, ours, user_id=5, chat_type="group"))
        await stack.feed(telegram.message_update(-300, "/help", user_id=5, chat_type="group"))
        assert await telegram.wait_for_texts(-300, 2) == [customer_texts.HELP, customer_texts.HELP]
        assert stack.chat.resets == []


async def test_a_chat_that_blocked_the_bot_gets_no_sends_until_it_unblocks(
    stored_stack: Stack, telegram: FakeTelegramServer
) -> None:
    blocked = f"handlers:{{tg:{CHAT}}}:blocked"
    await stored_stack.feed(telegram.member_update(CHAT, "member", "kicked"))
    await stored_stack.feed(telegram.message_update(CHAT, "вопрос после блокировки"))
    await stored_stack.feed(telegram.member_update(CHAT, "kicked", "member"))
    await stored_stack.feed(telegram.message_update(CHAT, "/start"))
    # In intake order: blocked, a question (answered by the model, never sent), unblocked.
    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.GREETING]
    assert await stored_stack.app.redis.exists(blocked) == 0
    session = await stored_stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert [m.undelivered for m in session.messages] == [False, True]


async def test_a_send_refused_with_403_marks_the_chat_blocked(
    stored_stack: Stack, telegram: FakeTelegramServer
) -> None:
    telegram.fail_next("sendMessage", 403, "Forbidden: bot was blocked by the user")
    await stored_stack.feed(telegram.message_update(CHAT, "/help"))
    await stored_stack.feed(telegram.message_update(CHAT, "/start"))
    blocked = f"handlers:{{tg:{CHAT}}}:blocked"
    await telegram.wait_for(lambda: len(telegram.calls_of("sendMessage")) == 1)
    await stored_stack.feed(telegram.member_update(CHAT, "kicked", "member"))
    await stored_stack.feed(telegram.message_update(CHAT, "/help"))
    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.HELP]
    # The /start after the 403 was not even tried: one refused send, then the last /help.
    assert len(telegram.calls_of("sendMessage")) == 2
    assert await stored_stack.app.redis.exists(blocked) == 0


async def test_a_lone_surrogate_is_cleaned_before_the_chat_service(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    await stack.feed(telegram.message_update(CHAT, "Где заказ \ud83d 8041?"))
    assert await telegram.wait_for_texts(CHAT, 1) == ["Ответ: Где заказ \ufffd 8041?"]
