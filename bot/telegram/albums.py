"""Several photos sent as one album (``media_group_id``): one message, one turn.

Telegram sends each photo of an album as an update of its own, a moment apart;
each is queued in the chat's order. The album's first photo to run (the
*leader*) waits until ``gather_seconds`` after its own intake, so that the
others are queued too, takes the queued photos of its group from the chat's
queue (read only: each stays queued), and answers them all in one turn. It
records which jobs it took (``{<conv>}:album:<group id>``) before its turn:
when those jobs come up, they are popped without a word. A leader that
crashed before its commit finds its own record and does it again; a photo
queued too late for the leader's turn comes back as a *late* album of its own
(the handler keeps it in the history without a second answer).
"""

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Final

from aiogram import Bot
from aiogram.types import Message
from pydantic import ValidationError

from bot.queue.job_results import JobContext
from bot.queue.jobs import QueuedJob
from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.keys import RedisKeys, telegram_conversation

ALBUM_GATHER_SECONDS: Final = 1.0
"""Telegram sends an album's updates within a fraction of a second of each other."""
ALBUM_MAX_PHOTOS: Final = 10
"""Telegram's limit of items in one album."""
_RECORD_TTL_SECONDS: Final = 24 * 3600


@dataclass(frozen=True, slots=True, kw_only=True)
class Album:
    """The messages one turn answers: the leader first, then its album's other photos."""

    messages: tuple[Message, ...]
    late: bool = False
    """One photo queued after its album's turn ran (the leader did not take it)."""


ANSWERED_ALREADY: Final = None
"""What :meth:`Albums.gather` returns for a photo its album's leader answered."""


@dataclass(frozen=True, kw_only=True)
class Albums:
    """Gathers an album's queued photos for its leader; tells the others they were answered."""

    redis: AsyncRedisClient
    keys: RedisKeys
    gather_seconds: float = ALBUM_GATHER_SECONDS

    async def gather(self, bot: Bot, message: Message, job: JobContext) -> Album | None:
        """The album ``message`` leads (itself alone outside an album), or ``None`` if answered."""
        group = message.media_group_id
        if group is None:
            return Album(messages=(message,))
        key = self.keys.conversation(telegram_conversation(message.chat.id)).album(group)
        job_id = job.job.job_id
        record = _record(await self.redis.get(key))
        if record is not None and record[0] != job_id:
            if job_id in record[1]:
                return ANSWERED_ALREADY
            # Queued too late for the leader's turn: the album was answered without it.
            return Album(messages=(message,), late=True)
        # Telegram's album items arrive together: wait for the rest to be queued.
        wait = job.job.enqueued_ms / 1000 + self.gather_seconds - time.time()
        if wait > 0:
            await asyncio.sleep(min(wait, self.gather_seconds))
        siblings = await self._queued_siblings(bot, message, group)
        members = [sibling_job for sibling_job, _ in siblings]
        await self.redis.set(
            key, json.dumps({"leader": job_id, "members": members}), ex=_RECORD_TTL_SECONDS
        )
        return Album(messages=(message, *(sibling for _, sibling in siblings)))

    async def _queued_siblings(
        self, bot: Bot, message: Message, group: str
    ) -> list[tuple[str, Message]]:
        queue = self.keys.conversation(telegram_conversation(message.chat.id)).queue
        # The head (index 0) is the leader's own job.
        raw_jobs = await self.redis.lrange(queue, 1, 4 * ALBUM_MAX_PHOTOS)
        found: list[tuple[str, Message]] = []
        for raw in raw_jobs:
            try:
                queued = QueuedJob.model_validate_json(text_of(raw))
                update = queued.update.get("message")
                if not isinstance(update, dict) or update.get("media_group_id") != group:
                    continue
                sibling = Message.model_validate(update, context={"bot": bot})
            except ValidationError:
                continue
            found.append((queued.job_id, sibling))
            if len(found) >= ALBUM_MAX_PHOTOS - 1:
                break
        return found


def _record(raw: object) -> tuple[str, frozenset[str]] | None:
    """The leader's job id and the job ids it took, from the stored record."""
    if raw is None:
        return None
    try:
        data = json.loads(text_of(raw))
        return str(data["leader"]), frozenset(str(member) for member in data["members"])
    except (ValueError, KeyError, TypeError):
        return None
