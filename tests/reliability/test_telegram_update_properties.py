"""Arbitrary Telegram updates through the real dispatcher and engine (offline model, real Redis).

Hypothesis writes updates of every kind the bot may see: private messages with
any Unicode text up to 4096 characters, with or without entities, captions,
photos or stickers instead of text, commands, group messages, edited messages,
channel posts, callback queries. The replies go over HTTP to the fake Bot API
server, which refuses what Telegram would refuse (empty text, more than 4096
characters, entities outside the text). Properties:

* no update makes the dispatcher raise;
* every private message gets exactly one reply (an answer, a command's answer,
  the "text only" note or an incident message), every other update none
  (documented: groups are off by default, edits and channel posts are ignored);
* a conversation's session in Redis is always readable.

The same properties hold for the 48 real updates of ``../shared/corpus``.
"""

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.types import Update
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot import customer_texts
from bot.language.catalogs import Catalogs
from bot.language.detect import LanguagePolicy
from bot.queue.admission import IntakeVerdict
from bot.sessions.models import ConversationSession
from bot.storage.keys import telegram_conversation
from bot.telegram.formatting import markdown_to_entities, split_formatted
from bot.telegram.middlewares.observability import update_chat_id
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer, utf16_len
from bot.testing.telegram_stack import TelegramStack, open_application
from tests.support.corpus import TELEGRAM_UPDATES, load_corpus, requires

PREFIX = "rtg"
ENTITY_TYPES = ["bold", "italic", "mention", "bot_command", "url", "code", "pre", "hashtag"]


class Stack(TelegramStack):
    """The bot's intake, worker pool and engine, built once per test, shared by its examples.

    No worker runs on its own: each update is handled as soon as it is queued.
    """

    async def feed(self, update: dict[str, Any]) -> IntakeVerdict | None:
        """One update through intake and its chat's queue, drained before returning."""
        validated = Update.model_validate(update, context={"bot": self.bot})
        verdict = await self.intake.accept(validated)
        if verdict is None:
            return None
        chat_id = update_chat_id(validated)
        assert chat_id is not None  # intake accepts only updates of a chat
        await self.drain(chat_id)
        return verdict

    async def session(self, chat_id: int) -> ConversationSession | None:
        """The stored session of a chat, parsed (raises if unreadable)."""
        key = self.app.sessions.keys(telegram_conversation(chat_id)).session
        raw = await self.app.redis.hget(key, "d")
        return None if raw is None else ConversationSession.model_validate_json(raw)


@pytest.fixture
async def stack(
    redis_server: RedisServer, redis_client: aioredis.Redis, telegram: FakeTelegramServer
) -> AsyncIterator[Stack]:
    settings_ = make_settings(
        REDIS_URL=redis_server.url, REDIS_KEY_PREFIX=PREFIX, LLM_BACKEND="offline"
    )
    bot = Bot(
        token=telegram.token,
        session=AiohttpSession(api=TelegramAPIServer.from_base(telegram.base_url)),
    )
    try:
        # The redis_client fixture flushed the database.
        async with open_application(settings_, flush=False) as app:
            yield Stack(app, bot)
    finally:
        await bot.session.close()


_ids = itertools.count(10_000)


def _entities(draw: st.DrawFn, text: str) -> list[dict[str, Any]]:
    limit = max(utf16_len(text), 1)
    return draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(ENTITY_TYPES),
                    "offset": st.integers(0, limit - 1),
                    "length": st.integers(1, limit),
                }
            ),
            max_size=3,
        )
    )


# The stack runs the default LANGUAGES and DEFAULT_LANGUAGE.
LANGUAGES = LanguagePolicy(languages=("ru", "en"), default="ru")
CATALOGS = Catalogs()


@st.composite
def message_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """What a message carries: text (any Unicode), a caption with media, or other content."""
    kind = draw(st.sampled_from(["text", "text", "command", "caption", "sticker", "empty"]))
    if kind == "text":
        text = draw(st.text(max_size=4096) | st.text(min_size=3000, max_size=4096))
        body: dict[str, Any] = {"text": text}
        if draw(st.booleans()):
            body["entities"] = _entities(draw, text)
        return body
    if kind == "command":
        command = draw(st.sampled_from(["/start", "/help", "/new", "/unknown", "/start@x"]))
        tail = draw(st.text(max_size=50))
        return {
            "text": f"{command} {tail}",
            "entities": [{"type": "bot_command", "offset": 0, "length": utf16_len(command)}],
        }
    if kind == "caption":
        caption = draw(st.text(max_size=1024))
        photo = {"file_id": "p", "file_unique_id": "u", "width": 1, "height": 1}
        return {"photo": [photo], "caption": caption}
    if kind == "sticker":
        return {
            "sticker": {
                "file_id": "s",
                "file_unique_id": "u",
                "type": "regular",
                "width": 1,
                "height": 1,
                "is_animated": False,
                "is_video": False,
            }
        }
    return {}


@st.composite
def updates(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """An update with fresh ids, and whether the bot must answer it (a private message)."""
    chat_id, update_id = next(_ids), next(_ids)
    user = {"id": chat_id, "is_bot": False, "first_name": draw(st.text(min_size=1, max_size=10))}
    kind = draw(
        st.sampled_from(
            ["message"] * 6 + ["group", "edited_message", "channel_post", "callback_query"]
        )
    )
    private = {"id": chat_id, "type": "private", "first_name": "Покупатель"}
    message = {"message_id": 1, "date": 1_700_000_000, "chat": private, "from": user}
    message.update(draw(message_bodies()))
    if kind == "message":
        return {"update_id": update_id, "message": message}, True
    if kind == "group":
        group = {"id": -chat_id, "type": "supergroup", "title": "Группа"}
        return {"update_id": update_id, "message": {**message, "chat": group}}, False
    if kind == "edited_message":
        return {"update_id": update_id, "edited_message": {**message, "edit_date": 1}}, False
    if kind == "channel_post":
        channel = {"id": -chat_id, "type": "channel", "title": "Канал"}
        post = {k: v for k, v in message.items() if k != "from"}
        return {"update_id": update_id, "channel_post": {**post, "chat": channel}}, False
    query = {"id": str(update_id), "from": user, "chat_instance": "ci", "data": "x"}
    return {"update_id": update_id, "callback_query": query}, False


@settings(
    max_examples=60,
    deadline=None,
    # The stack is built once for the test on purpose (it is costly); each example
    # uses fresh chat, user and update ids, so no example sees another's state.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=updates())
async def test_any_update_is_answered_once_or_ignored_and_the_session_stays_readable(
    stack: Stack, telegram: FakeTelegramServer, case: tuple[dict[str, Any], bool]
):
    update, must_answer = case
    before = len(telegram.calls_of("sendMessage"))

    await stack.feed(update)

    sent = telegram.calls_of("sendMessage")[before:]
    assert all(call.ok for call in sent), [call.status for call in sent]
    if not must_answer:
        assert sent == []
        return
    chat_id = update["message"]["chat"]["id"]
    assert {call.params["chat_id"] for call in sent} == {chat_id}
    text = update["message"].get("text")
    if text and not text.startswith("/"):
        session = await stack.session(chat_id)
        answers = [m for m in session.messages if m.role == "assistant"] if session else []
        if session is not None:
            assert session.messages[0].content == text.strip()
        if answers:
            # One turn, one answer: what was sent is that answer, split at Telegram's limit
            # (one message unless it is longer), and nothing else.
            [answer] = answers
            pieces = split_formatted(markdown_to_entities(answer.content))
            assert [call.params["text"] for call in sent] == [piece.text for piece in pieces]
        else:
            # No answer stored: an incident or a refusal, in one message.
            assert len(sent) == 1
    else:
        assert len(sent) == 1
        if not text:
            body = update["message"]
            message = (
                customer_texts.PHOTO
                if "photo" in body
                else customer_texts.STICKER
                if "sticker" in body
                else customer_texts.NON_TEXT
            )
            # A caption's letters choose the language as a text's do ("AAA": English).
            language = LANGUAGES.decide(
                stored=None, chosen=False, text=body.get("caption"), telegram_code=None
            )
            assert sent[0].params["text"] == CATALOGS.texts(language).gettext(message)


def _corpus() -> list[dict[str, Any]]:
    return load_corpus(TELEGRAM_UPDATES)


@requires(TELEGRAM_UPDATES)
async def test_real_updates_from_the_corpus_never_raise_and_get_at_most_one_answer(
    stack: Stack, telegram: FakeTelegramServer
):
    """48 updates from teloxide's tests; a repeated update id is answered once."""
    answered_ids: set[int] = set()
    for update in _corpus():
        before = len(telegram.calls_of("sendMessage"))
        await stack.feed(update)
        sent = telegram.calls_of("sendMessage")[before:]
        assert all(call.ok for call in sent)
        if sent:
            assert update["update_id"] not in answered_ids
            answered_ids.add(update["update_id"])
            message = update.get("message") or {}
            assert message.get("chat", {}).get("type") == "private"
            session = await stack.session(message["chat"]["id"])
            assert session is None or session.messages
    assert answered_ids  # the corpus holds private messages: some were answered
