"""Long polling that confirms a batch only after every update of it is in Redis.

``getUpdates`` with an offset tells Telegram the updates before it arrived.
The next offset is asked for only once the batch's updates are queued; if
Redis is down, the same batch is queued again when it is back (intake is
idempotent), so a crash or an outage never loses an update Telegram let go.
Each update is parsed on its own (:mod:`bot.telegram.raw_updates`): one that
aiogram cannot read is dropped and the rest of its batch goes on. A batch's
chats are queued a few at a time, each chat's updates in their order.
"""

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from aiogram import Bot
from aiogram.dispatcher.middlewares.user_context import UserContextMiddleware
from aiogram.exceptions import TelegramAPIError, TelegramNetworkError, TelegramServerError
from aiogram.types import Update
from redis.exceptions import RedisError

from bot.telegram.raw_updates import GetRawUpdates, parse_update, update_id_of
from bot.telegram.update_intake import TelegramIntake

logger = logging.getLogger(__name__)

POLL_TIMEOUT_SECONDS = 25
_BACKOFF_SECONDS = (0.5, 1.0, 2.0, 5.0)


@dataclass(frozen=True, kw_only=True)
class Poller:
    """``getUpdates`` -> intake, until stopped."""

    bot: Bot
    intake: TelegramIntake
    allowed_updates: list[str]
    _stop: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def stop(self) -> None:
        """Stop after the current batch is queued (an unconfirmed batch comes again)."""
        self._stop.set()

    async def run(self) -> None:
        """Poll and queue until :meth:`stop`."""
        offset: int | None = None
        failures = 0
        while not self._stop.is_set():
            try:
                updates = await self._poll(offset)
            except (TelegramNetworkError, TelegramServerError) as error:
                failures += 1
                logger.warning("getUpdates failed (%s); retrying", type(error).__name__)
                await self._pause(failures)
                continue
            except TelegramAPIError as error:
                failures += 1
                logger.error("getUpdates refused: %s", error)
                await self._pause(failures)
                continue
            if updates is None:
                return
            failures = 0
            chats: dict[int | None, list[tuple[Update, dict[str, Any]]]] = {}
            for raw in updates:
                update_id = update_id_of(raw)
                update = parse_update(raw, self.bot, source="getUpdates item")
                if update_id is None:
                    # Not an update at all: nothing to confirm it by, nothing to queue.
                    continue
                if update is not None:
                    chats.setdefault(_chat_of(update), []).append((update, raw))
                offset = update_id + 1
            if not await self._accept_batch(chats):
                return

    async def _poll(self, offset: int | None) -> list[dict[str, Any]] | None:
        request = asyncio.ensure_future(
            self.bot(
                GetRawUpdates(
                    offset=offset,
                    timeout=POLL_TIMEOUT_SECONDS,
                    allowed_updates=self.allowed_updates,
                ),
                request_timeout=int(self.bot.session.timeout + POLL_TIMEOUT_SECONDS),
            )
        )
        stopping = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({request, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not request.done():
            # Nothing of this poll was confirmed: Telegram hands it out again.
            request.cancel()
            with contextlib.suppress(asyncio.CancelledError, TelegramAPIError):
                await request
            return None
        return list(request.result())

    async def _accept_batch(
        self, chats: dict[int | None, list[tuple[Update, dict[str, Any]]]]
    ) -> bool:
        """Queue a batch: all its chats side by side, each chat's updates in order.

        Every Redis round trip of intake waits behind the turns the process runs
        meanwhile, so the batch takes as many of those waits as its longest chain:
        one update after another, a batch of a hundred took two hundred and the next
        ``getUpdates`` came seconds late in a burst; eight chats at a time, still 26,
        and the last batches of a 1,000-customer burst a second late (bench/README.md,
        issue 36, fifth round). A batch holds at most 100 updates (``getUpdates``'s
        limit), so at most 100 chains. A chat's own updates keep their order (its
        queue is that order); between chats Telegram promises none (a webhook gets
        them on parallel connections too). ``False`` if stopped first.
        """
        outage = _Outage()
        if len(chats) == 1:
            return await self._accept_in_order(next(iter(chats.values())), outage)
        async with asyncio.TaskGroup() as group:
            chains = [
                group.create_task(self._accept_in_order(updates, outage))
                for updates in chats.values()
            ]
        return all(chain.result() for chain in chains)

    async def _accept_in_order(
        self, updates: list[tuple[Update, dict[str, Any]]], outage: "_Outage"
    ) -> bool:
        """Queue one chat's updates one after another; ``False`` if stopped first."""
        for update, raw in updates:
            if not await self._accept(update, raw, outage):
                return False
        return True

    async def _accept(self, update: Update, raw: dict[str, Any], outage: "_Outage") -> bool:
        """Queue one update, retrying while Redis is down; ``False`` if stopped first."""
        failures = 0
        while True:
            try:
                await self.intake.accept(update, raw)
            except (RedisError, OSError) as error:
                failures += 1
                outage.failed(update.update_id, error)
                if not await self._pause(failures):
                    return False
                continue
            if failures:
                outage.queued(update.update_id, failures + 1)
            return True

    async def _pause(self, failures: int) -> bool:
        """Back off; ``False`` if stopped meanwhile."""
        delay = _BACKOFF_SECONDS[min(failures, len(_BACKOFF_SECONDS)) - 1]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._stop.wait()
        return not self._stop.is_set()


@dataclass
class _Outage:
    """A Redis outage as one batch meets it: logged when it begins and when it ends.

    The batch's chats retry side by side; each would otherwise log the same outage.
    """

    failing: bool = False

    def failed(self, update_id: int, error: Exception) -> None:
        """An update could not be queued."""
        if not self.failing:
            self.failing = True
            logger.warning(
                "Update %s not queued: Redis unavailable (%s); retrying",
                update_id,
                type(error).__name__,
            )

    def queued(self, update_id: int, attempts: int) -> None:
        """An update that had failed is queued now."""
        if self.failing:
            self.failing = False
            logger.info("Update %s queued after %d attempt(s)", update_id, attempts)


def _chat_of(update: Update) -> int | None:
    """The chat an update belongs to, as aiogram resolves it; ``None`` for one without."""
    chat = UserContextMiddleware.resolve_event_context(update).chat
    return chat.id if chat is not None else None
