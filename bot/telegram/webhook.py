"""The webhook endpoint: answer Telegram at once, handle the update in the background.

Telegram resends an update it got no answer for within about a minute, and a
model turn can take longer than that; so the request only checks the secret,
parses the body, starts the handling as a task and answers 200 at once.
"""

import asyncio
import logging
import secrets
from typing import Any

from aiogram import Bot, Dispatcher
from aiohttp import web

logger = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name, not a secret


class WebhookReceiver:
    """The aiohttp handler for ``WEBHOOK_PATH``; keeps a reference to every task it starts."""

    def __init__(self, dispatcher: Dispatcher, bot: Bot, *, secret: str) -> None:
        self._dispatcher = dispatcher
        self._bot = bot
        self._secret = secret
        self._tasks: set[asyncio.Task[None]] = set()

    async def handle(self, request: web.Request) -> web.Response:
        """Check the secret, start handling the update, answer 200 without waiting."""
        given = request.headers.get(SECRET_HEADER, "")
        if not secrets.compare_digest(given.encode(), self._secret.encode()):
            return web.Response(status=401, text="Unauthorized")
        try:
            payload = await request.json()
        except ValueError:
            return web.Response(status=400, text="Body is not JSON")
        if not isinstance(payload, dict):
            return web.Response(status=400, text="Body is not an Update")
        task = asyncio.create_task(self._feed(payload))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response({})

    async def _feed(self, payload: dict[str, Any]) -> None:
        try:
            await self._dispatcher.feed_raw_update(self._bot, payload)
        # One malformed update must not take the others down; it is logged and dropped.
        except Exception:
            logger.exception("Update %s could not be handled", payload.get("update_id"))
