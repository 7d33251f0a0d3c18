"""State kept for a chat is let go: draft pauses once they end, topic mappings after a month.

The pauses are in-process (a fake clock drives them); the topic mappings live in
the suite's redis-server and are read back with their TTLs.
"""

import redis.asyncio as aioredis

from bot.handoff.topics import TOPIC_TTL_SECONDS, TopicDirectory
from bot.storage.keys import RedisKeys
from bot.telegram.drafts import DraftPauses

STAFF = -1009400000001


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_ended_pause_is_forgotten_when_any_other_chat_streams() -> None:
    clock = Clock()
    pauses = DraftPauses(clock)
    for chat in range(1000):
        pauses.pause(chat, 2.0)
    pauses.pause(5000, 60.0)
    assert len(pauses) == 1001

    clock.now += 3
    # Another chat streams: the ended pauses go, whether or not their chats ever stream again.
    assert pauses.remaining(7) == 0.0
    assert len(pauses) == 1
    assert pauses.remaining(5000) == 57.0

    clock.now += 60
    pauses.pause(8000, 1.0)
    assert len(pauses) == 1
    assert pauses.remaining(8000) == 1.0


def test_a_pause_is_kept_for_its_whole_length() -> None:
    clock = Clock()
    pauses = DraftPauses(clock)
    pauses.pause(1, 5.0)
    pauses.pause(1, 1.0)
    clock.now += 4.5
    assert pauses.remaining(1) == 0.5
    clock.now += 0.5
    assert pauses.remaining(1) == 0.0
    assert len(pauses) == 0


async def test_topic_mappings_expire_and_every_handoff_step_renews_them(
    redis_client: aioredis.Redis,
) -> None:
    keys = RedisKeys("forgotten")
    topics = TopicDirectory(redis_client, keys=keys, staff_chat_id=STAFF)
    conversation = "tg:9401"
    forward = keys.conversation(conversation).topic_in(STAFF)
    reverse = keys.staff_topic(STAFF, 77)

    await topics.bind(conversation, 77, old=None)
    for key in (forward, reverse):
        assert TOPIC_TTL_SECONDS - 5 <= await redis_client.ttl(key) <= TOPIC_TTL_SECONDS

    # Later, with less time left: a handoff step renews both directions.
    for key in (forward, reverse):
        await redis_client.expire(key, 60)
    await topics.touch(conversation, 1_700_000_000_000)
    for key in (forward, reverse):
        assert await redis_client.ttl(key) > TOPIC_TTL_SECONDS - 5
    assert await topics.topic_of(conversation) == 77
    assert await topics.conversation_of(77) == conversation


async def test_a_topic_adopted_from_before_issue_22_expires_too(
    redis_client: aioredis.Redis,
) -> None:
    keys = RedisKeys("forgotten")
    topics = TopicDirectory(redis_client, keys=keys, staff_chat_id=STAFF)
    conversation = "tg:9402"
    await redis_client.set(keys.conversation(conversation).topic, "78")
    await redis_client.set(keys.staff_topic(STAFF, 78), conversation)

    assert await topics.topic_of(conversation) == 78
    ttl = await redis_client.ttl(keys.conversation(conversation).topic_in(STAFF))
    assert TOPIC_TTL_SECONDS - 5 <= ttl <= TOPIC_TTL_SECONDS
