"""The webhook endpoint: 200 only once the update is queued in Redis.

Intake is one quick, idempotent script, so the request waits for it and
answers Telegram afterwards: 200 means the update is safe; if Redis cannot
take it the answer is 503 and Telegram delivers it again later. The turn
itself runs in a worker (this process's or another's), bounded per process.
"""

import logging
import secrets

from aiogram import Bot
from aiogram.types import Update
from aiohttp import web
from pydantic import ValidationError
from redis.exceptions import RedisError

from bot.telegram.intake import TelegramIntake

logger = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name, not a secret


class WebhookReceiver:
    """The aiohttp handler for ``WEBHOOK_PATH``."""

    def __init__(self, intake: TelegramIntake, bot: Bot, *, secret: str) -> None:
        self._intake = intake
        self._bot = bot
        self._secret = secret

    async def handle(self, request: web.Request) -> web.Response:
        """Check the secret, queue the update, then answer."""
        given = request.headers.get(SECRET_HEADER, "")
        if not secrets.compare_digest(given.encode(), self._secret.encode()):
            return web.Response(status=401, text="Unauthorized")
        try:
            payload = await request.json()
        except ValueError:
            return web.Response(status=400, text="Body is not JSON")
        if not isinstance(payload, dict):
            return web.Response(status=400, text="Body is not an Update")
        try:
            update = Update.model_validate(payload, context={"bot": self._bot})
        except ValidationError as error:
            # The body may hold a customer's words: log where it failed, never its values.
            logger.warning(
                "Webhook body is not an Update (update_id=%r, %d problem(s))",
                payload.get("update_id") if isinstance(payload.get("update_id"), int) else None,
                error.error_count(),
            )
            return web.Response(status=400, text="Body is not an Update")
        try:
            await self._intake.accept(update)
        except (RedisError, OSError) as error:
            logger.warning(
                "Update %s not queued: Redis unavailable (%s); Telegram will retry",
                update.update_id,
                type(error).__name__,
            )
            return web.Response(status=503, text="Storage unavailable")
        return web.json_response({})
