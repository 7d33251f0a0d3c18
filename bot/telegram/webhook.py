"""The webhook endpoint: answer Telegram at once, handle the update in the background.

Telegram resends an update it got no answer for within about a minute, and a
model turn can take longer than that; so the request only checks the secret,
parses the body, starts the handling as a task and answers 200 at once.
"""

import asyncio
import json
import logging
import re
import secrets
from typing import Any

from aiogram import Bot, Dispatcher
from aiogram.types import Update
from aiohttp import web
from pydantic import ValidationError

logger = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name, not a secret
DEFAULT_BODY_TIMEOUT_SECONDS = 10.0
# An update kind is a field name such as "message"; anything else is not logged.
_KIND = re.compile(r"[a-z_]{1,32}")


class WebhookReceiver:
    """The aiohttp handler for ``WEBHOOK_PATH``; keeps a reference to every task it starts."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        bot: Bot,
        *,
        secret: str,
        body_timeout_seconds: float = DEFAULT_BODY_TIMEOUT_SECONDS,
    ) -> None:
        self._dispatcher = dispatcher
        self._bot = bot
        self._secret = secret
        self._body_timeout = body_timeout_seconds
        self._tasks: set[asyncio.Task[None]] = set()

    async def handle(self, request: web.Request) -> web.Response:
        """Check the secret, start handling the update, answer 200 without waiting."""
        given = request.headers.get(SECRET_HEADER, "")
        if not secrets.compare_digest(given.encode(), self._secret.encode()):
            return web.Response(status=401, text="Unauthorized")
        try:
            # A client trickling its body must not hold a connection and a task forever.
            async with asyncio.timeout(self._body_timeout):
                body = await request.read()
        except TimeoutError:
            return web.Response(status=408, text="Body too slow", headers={"Connection": "close"})
        try:
            payload = json.loads(body)
        except ValueError:
            return web.Response(status=400, text="Body is not JSON")
        if not isinstance(payload, dict):
            return web.Response(status=400, text="Body is not an Update")
        try:
            update = Update.model_validate(payload, context={"bot": self._bot})
        except ValidationError:
            # The validation error quotes the input, which may be customer text: only
            # the kind and the id are logged. 200, so that Telegram does not resend it.
            logger.warning(
                "Webhook body is not an Update (kind %s, update id %s); dropped",
                _kind(payload),
                _update_id(payload),
            )
            return web.json_response({})
        task = asyncio.create_task(self._feed(update))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response({})

    async def _feed(self, update: Update) -> None:
        try:
            await self._dispatcher.feed_update(self._bot, update)
        # One failing update must not take the others down; it is logged and dropped.
        except Exception:
            logger.exception("Update %s could not be handled", update.update_id)


def _kind(payload: dict[str, Any]) -> str:
    kinds = sorted(key for key in payload if key != "update_id" and _KIND.fullmatch(key))
    return ",".join(kinds[:3]) or "none"


def _update_id(payload: dict[str, Any]) -> str:
    value = payload.get("update_id")
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "none"
