"""The staff group of handoffs: checked at start-up, and its topics kept apart from other groups'.

Start-up runs the real :func:`bot.telegram.process.run_bot` (whose preflight checks
the group over plain HTTP, before aiogram is needed) against the fake Bot API and a
real Redis; the topic mappings use a real Redis.
"""

import asyncio
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from bot.handoff.topics import TopicDirectory
from bot.settings import Settings
from bot.storage.keys import RedisKeys
from bot.telegram.preflight import NO_TOPIC_RIGHTS, NOT_A_FORUM, LightBotApi
from bot.telegram.process import run_bot
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer

pytestmark = pytest.mark.timeout(60)

STAFF = -1001234567890
OTHER_STAFF = -1009876543210


def _not_a_forum(telegram: FakeTelegramServer) -> None:
    """A plain supergroup: Topics were never turned on."""


def _bot_is_a_member(telegram: FakeTelegramServer) -> None:
    telegram.make_forum(STAFF)
    telegram.set_bot_member(STAFF, "member")


def _admin_without_topics(telegram: FakeTelegramServer) -> None:
    telegram.make_forum(STAFF)
    telegram.set_bot_member(STAFF, "administrator", can_manage_topics=False)


def _bot_not_in_group(telegram: FakeTelegramServer) -> None:
    telegram.unknown_chats.add(STAFF)


@pytest.mark.parametrize(
    ("arrange", "line"),
    [
        (_not_a_forum, f"error: {NOT_A_FORUM}"),
        (_bot_is_a_member, f"error: {NO_TOPIC_RIGHTS}"),
        (_admin_without_topics, f"error: {NO_TOPIC_RIGHTS}"),
        (
            _bot_not_in_group,
            "error: the bot cannot see the STAFF_CHAT_ID group "
            "(Bad Request: chat not found): add the bot to it",
        ),
    ],
    ids=["not-a-forum", "bot-is-a-member", "admin-without-topics", "bot-not-in-group"],
)
async def test_a_staff_chat_where_the_bot_cannot_manage_topics_stops_start_up_in_one_line(
    arrange: Callable[[FakeTelegramServer], None],
    line: str,
    telegram: FakeTelegramServer,
    redis_server: RedisServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    arrange(telegram)
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="staffcheck",
        STAFF_CHAT_ID=STAFF,
    )
    async with asyncio.timeout(30):
        assert await run_bot(settings, "polling", asyncio.Event()) == 1

    assert capsys.readouterr().err.strip().splitlines() == [line]
    # Stopped before taking any update or touching the staff chat.
    assert telegram.calls_of("getUpdates") == []
    assert telegram.calls_of("createForumTopic") == []


async def staff_chat_problem(telegram: FakeTelegramServer) -> str | None:
    settings: Settings = make_settings(TELEGRAM_API_BASE_URL=telegram.base_url)
    api = LightBotApi(settings, environ={})
    async with api.session() as session:
        me = await api.identity(session)
        return await api.staff_chat_problem(session, STAFF, me.id)


async def test_a_forum_where_the_bot_is_an_admin_that_manages_topics_passes(
    telegram: FakeTelegramServer,
) -> None:
    telegram.make_forum(STAFF)
    assert await staff_chat_problem(telegram) is None
    telegram.set_bot_member(STAFF, "administrator", can_manage_topics=True)
    assert await staff_chat_problem(telegram) is None
    telegram.set_bot_member(STAFF, "creator")
    assert await staff_chat_problem(telegram) is None


async def test_topic_mappings_belong_to_their_staff_group(redis_client: aioredis.Redis) -> None:
    keys = RedisKeys("scope")
    old = TopicDirectory(redis_client, keys=keys, staff_chat_id=STAFF)
    new = TopicDirectory(redis_client, keys=keys, staff_chat_id=OTHER_STAFF)
    await old.bind("tg:1", 5, old=None)
    await new.bind("tg:2", 5, old=None)

    assert (await old.topic_of("tg:1"), await old.conversation_of(5)) == (5, "tg:1")
    assert (await new.topic_of("tg:2"), await new.conversation_of(5)) == (5, "tg:2")
    assert await new.topic_of("tg:1") is None
    assert await old.topic_of("tg:2") is None


async def test_a_topic_mapped_before_groups_were_named_is_kept_only_in_its_own_group(
    redis_client: aioredis.Redis,
) -> None:
    """A topic stored by an older version (``{conv}:topic``) is adopted where it maps back."""
    keys = RedisKeys("legacy")
    group = TopicDirectory(redis_client, keys=keys, staff_chat_id=STAFF)
    other = TopicDirectory(redis_client, keys=keys, staff_chat_id=OTHER_STAFF)
    await redis_client.set(keys.staff_topic(STAFF, 7), "tg:1")
    await redis_client.set(keys.conversation("tg:1").topic, "7")
    # Another customer has topic 7 in the other group.
    await redis_client.set(keys.staff_topic(OTHER_STAFF, 7), "tg:2")

    assert await other.topic_of("tg:1") is None
    assert await group.topic_of("tg:1") == 7
    assert await redis_client.get(keys.conversation("tg:1").topic_in(STAFF)) == b"7"
