"""Albums against a real Redis: the leader takes its queued photos, once, even when re-run.

The chat's queue is filled as intake fills it (jobs as JSON, the head first); the
leader's record decides what its album's other photos do when they come up.
"""

from typing import Any

import redis.asyncio as aioredis
from aiogram import Bot
from aiogram.types import Message

from bot.queue.job_results import JobContext
from bot.queue.jobs import QueuedJob
from bot.storage.keys import RedisKeys, telegram_conversation
from bot.telegram.albums import Albums
from bot.testing.telegram_server import FakeTelegramServer

CHAT = 707
KEYS = RedisKeys("albums")


def job(telegram: FakeTelegramServer, update_id: int, group: str | None) -> QueuedJob:
    extra: dict[str, Any] = {
        "photo": [{"file_id": f"p{update_id}", "file_unique_id": "u", "width": 1, "height": 1}]
    }
    if group is not None:
        extra["media_group_id"] = group
    update = telegram.message_update(CHAT, extra=extra, update_id=update_id)
    return QueuedJob(
        job_id=str(update_id),
        update_id=update_id,
        turn_id="T" * 10,
        enqueued_ms=0,
        chat_id=CHAT,
        update=update,
    )


def held(queued: QueuedJob) -> JobContext:
    return JobContext(
        job=queued,
        job_raw=queued.model_dump_json(),
        token="t",
        queue_ms=0.0,
        session_version="",
        session_data="",
    )


def message(queued: QueuedJob, bot: Bot) -> Message:
    return Message.model_validate(queued.update["message"], context={"bot": bot})


async def queue(redis: aioredis.Redis, *jobs: QueuedJob) -> None:
    key = KEYS.conversation(telegram_conversation(CHAT)).queue
    await redis.delete(key)
    await redis.rpush(key, *(queued.model_dump_json() for queued in jobs))


def ids(album: Any) -> list[int]:
    return [item.message_id for item in album.messages]


async def test_the_leader_takes_its_queued_photos_and_they_are_answered_already(
    redis_client: aioredis.Redis, telegram: FakeTelegramServer, bot: Bot
) -> None:
    albums = Albums(redis=redis_client, keys=KEYS, gather_seconds=0)
    leader, text, first, second = (
        job(telegram, 1, "G"),
        job(telegram, 2, None),
        job(telegram, 3, "G"),
        job(telegram, 4, "G"),
    )
    await queue(redis_client, leader, text, first, second)

    album = await albums.gather(bot, message(leader, bot), held(leader))
    assert album is not None
    expected = [message(j, bot).message_id for j in (leader, first, second)]
    assert ids(album) == expected
    # A re-run of the leader (its process died before the commit) gathers the same.
    again = await albums.gather(bot, message(leader, bot), held(leader))
    assert again is not None
    assert ids(again) == expected
    # The album's other photos, when they come up, were answered with it.
    await queue(redis_client, first, second)
    assert await albums.gather(bot, message(first, bot), held(first)) is None
    assert await albums.gather(bot, message(second, bot), held(second)) is None


async def test_a_photo_queued_after_the_leaders_turn_comes_back_late(
    redis_client: aioredis.Redis, telegram: FakeTelegramServer, bot: Bot
) -> None:
    albums = Albums(redis=redis_client, keys=KEYS, gather_seconds=0)
    leader, late = job(telegram, 11, "H"), job(telegram, 12, "H")
    await queue(redis_client, leader)
    album = await albums.gather(bot, message(leader, bot), held(leader))
    assert album is not None
    assert len(album.messages) == 1

    await queue(redis_client, late)
    own = await albums.gather(bot, message(late, bot), held(late))
    assert own is not None
    assert ids(own) == [message(late, bot).message_id]
    # Late: the handler keeps it without a second answer; the leader's album was not late.
    assert own.late
    assert not album.late
