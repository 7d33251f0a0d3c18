"""Intake never fails on an update's content, in polling and in webhook mode (groups allowed).

The whole of ``../shared/corpus/telegram_updates`` and mutated copies of its
updates (lone surrogates inserted into texts and captions, entity offsets and
lengths pushed past the end, messages moved into a group that mentions the
bot) go through the production intake: in polling mode from the fake Bot API
through the real :class:`Poller`, in webhook mode over HTTP to the real
:class:`WebhookReceiver`. Properties, per batch of updates:

* nothing raises: the poller keeps polling, the webhook answers 200 (never 500);
* the update sent after the batch is queued (the batch goes on);
* an update intake accepted is in Redis exactly once (its ``seen`` mark).

One Redis, one fake Bot API, one poller and one webhook server per test.
"""

import asyncio
import copy
import itertools
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.queue.admission import FloodLimits, Intake
from bot.queue.jobs import QueuedJob
from bot.queue.work_stream import WorkStream
from bot.storage.connection import text_of
from bot.storage.keys import RedisKeys, telegram_conversation
from bot.telegram.callbacks import PressAnswers
from bot.telegram.polling import Poller
from bot.telegram.sending import ReplySender
from bot.telegram.update_intake import TelegramIntake
from bot.telegram.webhook import SECRET_HEADER, WebhookReceiver
from bot.testing.redis_server import free_port
from bot.testing.telegram_server import FakeTelegramServer, utf16_len
from tests.support.corpus import TELEGRAM_UPDATES, load_corpus, requires

PREFIX = "rin"
SECRET = "webhook-secret-of-this-test"
CANARY_CHAT = 424242
BOT_USERNAME = "support_test_bot"

_ids = itertools.count(5_000_000)
_CORPUS: list[dict[str, Any]] = load_corpus(TELEGRAM_UPDATES)


class IntakeStack:
    """Production intake over one Redis; a poller and a webhook server feeding it."""

    def __init__(self, redis: aioredis.Redis, bot: Bot, telegram: FakeTelegramServer) -> None:
        self.redis = redis
        self.bot = bot
        self.telegram = telegram
        self.keys = RedisKeys(PREFIX)
        work = WorkStream(redis, stream=self.keys.work_stream, consumer="tester")
        # Limits out of the way: the claim is about content, not about floods.
        limits = FloodLimits(burst=1000, interval_seconds=0.01, daily_turns=1_000_000)
        self.intake = TelegramIntake(
            intake=Intake(redis, keys=self.keys, work=work, limits=limits),
            bot=bot,
            allow_groups=True,
            presses=PressAnswers(bot=bot, sender=ReplySender(max_attempts=1)),
        )
        self.poller = Poller(bot=bot, intake=self.intake, allowed_updates=[])
        self.polling: asyncio.Task[None] | None = None
        self.webhook_url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Start polling and the webhook server."""
        self.polling = asyncio.create_task(self.poller.run())
        app = web.Application()
        receiver = WebhookReceiver(intake=self.intake, bot=self.bot, secret=SECRET)
        app.router.add_post("/tg", receiver.handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self.webhook_url = f"http://127.0.0.1:{port}/tg"

    async def close(self) -> None:
        """Stop both."""
        self.poller.stop()
        if self.polling is not None:
            async with asyncio.timeout(30):
                await asyncio.gather(self.polling, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()

    async def seen(self, update: dict[str, Any], chat_id: int) -> bool:
        """Whether intake accepted ``update`` into ``chat_id``'s queue."""
        key = self.keys.conversation(telegram_conversation(chat_id)).seen(update["update_id"])
        return bool(await self.redis.exists(key))

    async def poll_batch(self, batch: list[dict[str, Any]]) -> None:
        """``batch`` then a canary through ``getUpdates``; returns once all of it is queued."""
        canary = _canary()
        await self.telegram.push(*batch, canary)
        async with asyncio.timeout(20):
            while not await self.seen(canary, CANARY_CHAT):
                assert self.polling is not None
                if self.polling.done():
                    # The poller stopped on an update: raise what it raised.
                    self.polling.result()
                    pytest.fail("the poller stopped")
                await asyncio.sleep(0.01)
        # The chats of a batch are queued side by side: the canary's may come first.
        # The batch is wholly queued once the poller asks for the next one.
        await self.telegram.wait_for(lambda: self.telegram.unconfirmed() == 0, within=20)
        await self.accepted_once()

    async def accepted_once(self) -> None:
        """Every update intake marked accepted is queued exactly once, in its own chat.

        Nothing here drains a queue: each ``seen`` mark (chat, update id) must have
        exactly one job of that update id in that chat's queue, and every queued job
        a mark.
        """
        marks: list[tuple[str, int]] = []
        async for raw in self.redis.scan_iter(match=f"{PREFIX}:{{*}}:seen:*"):
            chat, _, update_id = text_of(raw).rpartition(":seen:")
            marks.append((chat, int(update_id)))
        jobs: list[tuple[str, int]] = []
        async for raw in self.redis.scan_iter(match=f"{PREFIX}:{{*}}:queue"):
            chat = text_of(raw).removesuffix(":queue")
            for job in await self.redis.lrange(raw, 0, -1):
                jobs.append((chat, QueuedJob.model_validate_json(job).update_id))
        assert marks, "nothing was accepted"
        assert sorted(jobs) == sorted(set(marks)), "an accepted update is not queued once"

    async def post_batch(self, batch: list[dict[str, Any]]) -> list[int]:
        """``batch`` then a canary to the webhook; the statuses of the batch's answers."""
        canary = _canary()
        statuses: list[int] = []
        async with aiohttp.ClientSession() as http:
            for update in [*batch, canary]:
                async with http.post(
                    self.webhook_url, json=update, headers={SECRET_HEADER: SECRET}
                ) as response:
                    statuses.append(response.status)
        assert statuses[-1] == 200
        assert await self.seen(canary, CANARY_CHAT)
        await self.accepted_once()
        return statuses[:-1]


def _canary() -> dict[str, Any]:
    chat = {"id": CANARY_CHAT, "type": "private", "first_name": "Канарейка"}
    user = {"id": CANARY_CHAT, "is_bot": False, "first_name": "Канарейка"}
    message = {"message_id": 1, "date": 1_700_000_000, "chat": chat, "from": user, "text": "ок"}
    return {"update_id": next(_ids), "message": message}


@pytest.fixture
async def stack(
    redis_client: aioredis.Redis, telegram: FakeTelegramServer
) -> AsyncIterator[IntakeStack]:
    bot = Bot(
        token=telegram.token,
        session=AiohttpSession(api=TelegramAPIServer.from_base(telegram.base_url)),
    )
    made = IntakeStack(redis_client, bot, telegram)
    await made.start()
    try:
        yield made
    finally:
        await made.close()
        await bot.session.close()


# --- mutations of corpus updates ---------------------------------------------------


def _messages(value: Any) -> list[dict[str, Any]]:
    """Every dict inside ``value`` with a text or a caption (messages, nested ones too)."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        if isinstance(value.get("text"), str) or isinstance(value.get("caption"), str):
            found.append(value)
        for item in value.values():
            found += _messages(item)
    elif isinstance(value, list):
        for item in value:
            found += _messages(item)
    return found


@st.composite
def mutated_updates(draw: st.DrawFn) -> dict[str, Any]:
    """A corpus update with a fresh id, its texts and entities broken in Telegram's ways."""
    update: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(_CORPUS)))
    update["update_id"] = next(_ids)
    message = update.get("message")
    if isinstance(message, dict) and draw(st.booleans()):
        # Into a group, addressed to the bot by a mention: the filter reads the entity.
        group_id = -(next(_ids))
        message["chat"] = {"id": group_id, "type": "supergroup", "title": "Группа"}
        old_text = message.get("text")
        text = old_text if isinstance(old_text, str) else "вопрос"
        mention = f"@{BOT_USERNAME}"
        message["text"] = f"{text} {mention}"
        entity = {"type": "mention", "offset": utf16_len(text) + 1, "length": len(mention)}
        message["entities"] = [*message.get("entities", []), entity]
    for found in _messages(update):
        for field, entities in (("text", "entities"), ("caption", "caption_entities")):
            value = found.get(field)
            if not isinstance(value, str):
                continue
            if draw(st.booleans()):
                where = draw(st.integers(0, len(value)))
                half = chr(draw(st.integers(0xD800, 0xDFFF)))
                found[field] = value[:where] + half + value[where:]
            if found.get(entities) and draw(st.booleans()):
                past = utf16_len(value) + draw(st.integers(0, 10))
                for entity in found[entities]:
                    if draw(st.booleans()):
                        entity["offset"] = past
                    else:
                        entity["length"] = past + draw(st.integers(1, 10))
    return update


_PROPERTY_SETTINGS = settings(
    max_examples=15,
    deadline=None,
    # One stack per test on purpose (it is costly); each example uses fresh update ids.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
requires_corpus = requires(TELEGRAM_UPDATES)


def _surrogate_mention(update_id: int, chat_id: int) -> dict[str, Any]:
    """The update of the report: half an emoji, then a mention of someone."""
    text = "hi \ud83d @someone and @" + BOT_USERNAME
    mention = len("hi \ud83d @someone and ")
    return {
        "update_id": update_id,
        "message": {
            "message_id": 7,
            "date": 1_700_000_000,
            "chat": {"id": chat_id, "type": "supergroup", "title": "Группа"},
            "from": {"id": 99, "is_bot": False, "first_name": "Гость"},
            "text": text,
            "entities": [
                {"type": "mention", "offset": 4, "length": 8},
                {"type": "mention", "offset": mention, "length": len(BOT_USERNAME) + 1},
            ],
        },
    }


async def test_a_group_message_with_half_an_emoji_and_a_mention_is_taken_in_both_modes(
    stack: IntakeStack,
) -> None:
    polled = _surrogate_mention(next(_ids), -777)
    await stack.poll_batch([polled])
    posted = _surrogate_mention(next(_ids), -778)
    assert await stack.post_batch([posted]) == [200]
    # Addressed to the bot (its mention comes after the half emoji): queued, not dropped.
    assert await stack.seen(polled, -777)
    assert await stack.seen(posted, -778)


@requires_corpus
async def test_the_whole_corpus_goes_through_both_modes(stack: IntakeStack) -> None:
    batch = copy.deepcopy(_CORPUS)
    for update in batch:
        update["update_id"] = next(_ids)
    await stack.poll_batch(batch)
    for update in batch:
        update["update_id"] = next(_ids)
    assert set(await stack.post_batch(batch)) == {200}


@requires_corpus
@_PROPERTY_SETTINGS
@given(batch=st.lists(mutated_updates(), min_size=1, max_size=4))
async def test_mutated_corpus_updates_never_stop_polling(
    stack: IntakeStack, batch: list[dict[str, Any]]
) -> None:
    await stack.poll_batch(batch)


@requires_corpus
@_PROPERTY_SETTINGS
@given(batch=st.lists(mutated_updates(), min_size=1, max_size=4))
async def test_mutated_corpus_updates_are_answered_200_by_the_webhook(
    stack: IntakeStack, batch: list[dict[str, Any]]
) -> None:
    assert set(await stack.post_batch(batch)) == {200}


def _nested_private(update_id: int, chat_id: int, depth: int) -> dict[str, Any]:
    """A private message that parses as an Update but nests a field ``depth`` lists deep.

    Deep enough that storing it fails (the payload cannot be serialised); not so
    deep that the JSON cannot be read at all (that is the webhook's 400).
    """
    deep: list[Any] = []
    for _ in range(depth):
        deep = [deep]
    chat = {"id": chat_id, "type": "private", "first_name": "Покупатель"}
    user = {"id": chat_id, "is_bot": False, "first_name": "Покупатель"}
    text = "секретный вопрос"
    message = {"message_id": 3, "date": 1, "chat": chat, "from": user, "text": text, "deep": deep}
    return {"update_id": update_id, "message": message}


async def _queued_notices(stack: IntakeStack, chat_id: int) -> list[Any]:
    queue = stack.keys.conversation(telegram_conversation(chat_id)).queue
    return [json.loads(raw).get("notice") for raw in await stack.redis.lrange(queue, 0, -1)]


async def test_an_update_intake_cannot_read_is_answered_and_the_batch_goes_on(
    stack: IntakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    polled = _nested_private(next(_ids), 31_001, depth=600)
    posted = _nested_private(next(_ids), 31_002, depth=600)
    with caplog.at_level(logging.INFO):
        await stack.poll_batch([polled])
        assert await stack.post_batch([posted]) == [200]

    # The customer is told (a kind notice queued in their chat), nothing else is kept.
    assert await _queued_notices(stack, 31_001) == ["unreadable"]
    assert await _queued_notices(stack, 31_002) == ["unreadable"]
    lines = [r.getMessage() for r in caplog.records if "could not be read" in r.getMessage()]
    # Polling stores the parsed update (pydantic refuses the depth), the webhook the raw one.
    assert [re.sub(r"\((\w+Error)\)", "(E)", line) for line in lines] == [
        f"Update {polled['update_id']} (message) could not be read (E); answered with a notice",
        f"Update {posted['update_id']} (message) could not be read (E); answered with a notice",
    ]
    assert "секретный" not in caplog.text
    assert all(record.exc_info is None for record in caplog.records)


def _rejected_by_aiogram(update_id: int) -> dict[str, Any]:
    """An update aiogram's models refuse (a chat without its type), as a newer API might send."""
    chat = {"id": 31_003, "first_name": "Покупатель"}
    message = {"message_id": 4, "date": 1, "chat": chat, "text": "секретный вопрос"}
    return {"update_id": update_id, "message": message}


async def test_an_update_aiogram_rejects_is_dropped_and_the_rest_of_its_batch_is_queued(
    stack: IntakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    before = _canary()
    rejected = _rejected_by_aiogram(next(_ids))
    with caplog.at_level(logging.INFO):
        # The canary after the batch must be queued: the poller goes on past it.
        await stack.poll_batch([before, rejected])

    assert await stack.seen(before, CANARY_CHAT)
    assert not await stack.seen(rejected, 31_003)
    dropped = [r.getMessage() for r in caplog.records if "is not an Update" in r.getMessage()]
    update_id = rejected["update_id"]
    assert dropped == [
        f"getUpdates item is not an Update (kind message, update id {update_id}); dropped"
    ]
    assert "секретный" not in caplog.text
