"""The webhook endpoint: 200 only once the update is queued in Redis.

Intake is one quick, idempotent script, so the request waits for it and
answers Telegram afterwards: 200 means the update is safe; if Redis cannot
take it the answer is 503 and Telegram delivers it again later. The turn
itself runs in a worker (this process's or another's), bounded per process.
"""

import asyncio
import json
import logging
import secrets
from dataclasses import dataclass, field

from aiogram import Bot
from aiohttp import web
from redis.exceptions import RedisError

from bot.telegram.raw_updates import parse_update
from bot.telegram.update_intake import TelegramIntake

logger = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name, not a secret
DEFAULT_BODY_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, kw_only=True)
class WebhookReceiver:
    """The aiohttp handler for ``WEBHOOK_PATH``."""

    intake: TelegramIntake
    bot: Bot
    # Kept out of repr(): never in a log line or a traceback.
    secret: str = field(repr=False)
    body_timeout_seconds: float = DEFAULT_BODY_TIMEOUT_SECONDS

    async def handle(self, request: web.Request) -> web.Response:  # noqa: PLR0911 - one answer per failure
        """Check the secret, queue the update, then answer."""
        given = request.headers.get(SECRET_HEADER, "")
        if not secrets.compare_digest(given.encode(), self.secret.encode()):
            return web.Response(status=401, text="Unauthorized")
        try:
            # A client trickling its body must not hold a connection and a task forever.
            async with asyncio.timeout(self.body_timeout_seconds):
                body = await request.read()
        except TimeoutError:
            return web.Response(status=408, text="Body too slow", headers={"Connection": "close"})
        try:
            payload = json.loads(body)
        except ValueError:
            return web.Response(status=400, text="Body is not JSON")
        except RecursionError:
            return _too_deep()
        if not isinstance(payload, dict):
            return web.Response(status=400, text="Body is not an Update")
        try:
            update = parse_update(payload, self.bot, source="Webhook body")
        except RecursionError:
            return _too_deep()
        if update is None:
            # 200, so that Telegram does not resend what can never be read.
            return web.json_response({})
        try:
            await self.intake.accept(update, payload)
        except (RedisError, OSError) as error:
            logger.warning(
                "Update %s not queued: Redis unavailable (%s); Telegram will retry",
                update.update_id,
                type(error).__name__,
            )
            return web.Response(status=503, text="Storage unavailable")
        return web.json_response({})


def _too_deep() -> web.Response:
    # No update nests this deep: not one Telegram sends, and nothing of it is readable.
    logger.warning("Webhook body is nested too deep to read; refused")
    return web.Response(status=400, text="Body is nested too deep")
