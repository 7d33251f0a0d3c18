"""Running the bot: settings check, start-up, polling or webhook, graceful shutdown.

Start-up order: settings (exit 2 on a bad or missing token, before any
connection), the engine (Redis must answer, exit 1 otherwise), the Bot API
(the token must be accepted), the command menu, then updates. Shutdown on
SIGINT/SIGTERM: stop taking updates, let turns in flight finish within
``TELEGRAM_SHUTDOWN_GRACE_SECONDS`` (cancel what is left), close the bot's
HTTP session, then the engine (executor, model client, Redis).
"""

import asyncio
import logging
import re
import signal
import sys
from contextlib import suppress
from typing import Literal

from aiogram import Bot
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import TelegramAPIError, TelegramUnauthorizedError
from aiogram.types import BotCommand
from aiogram.utils.token import TokenValidationError, validate_token
from aiohttp import web

from bot.app import Application, StartupError, build_application
from bot.llm.types import ToolCallingClient
from bot.redis_connection import describe_target
from bot.settings import Settings
from bot.startup import configure_logging, load_settings
from bot.telegram import messages
from bot.telegram.dispatcher import TelegramFrontEnd, build_dispatcher
from bot.telegram.health import HEALTH_PATH, HealthEndpoint
from bot.telegram.session import BotApiSession
from bot.telegram.webhook import WebhookReceiver

logger = logging.getLogger(__name__)

Mode = Literal["polling", "webhook"]

# Telegram's rule for the webhook secret token.
_SECRET_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,256}$")


def settings_problems(settings: Settings, mode: Mode) -> list[str]:
    """What makes these settings unusable for ``mode`` (never quoting a secret)."""
    problems = []
    token = settings.telegram.bot_token
    if token is None or not token.get_secret_value().strip():
        problems.append("TELEGRAM_BOT_TOKEN is not set: put the token from @BotFather in .env")
    else:
        try:
            validate_token(token.get_secret_value())
        except TokenValidationError:
            problems.append(
                "TELEGRAM_BOT_TOKEN is malformed: expected <digits>:<secret> as @BotFather gives it"
            )
    if mode == "webhook":
        webhook = settings.webhook
        if not webhook.url:
            problems.append("WEBHOOK_URL is not set: the public HTTPS URL Telegram posts to")
        secret = webhook.secret.get_secret_value() if webhook.secret else ""
        if not _SECRET_TOKEN.match(secret):
            problems.append(
                "WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and - in webhook mode"
            )
        if not webhook.path.startswith("/"):
            problems.append("WEBHOOK_PATH must start with /")
    return problems


def webhook_public_url(settings: Settings) -> str:
    """What Telegram posts to: ``WEBHOOK_URL`` (scheme and host) plus ``WEBHOOK_PATH``."""
    return f"{(settings.webhook.url or '').rstrip('/')}{settings.webhook.path}"


def create_bot(settings: Settings) -> Bot:
    """A Bot talking to ``TELEGRAM_API_BASE_URL`` (Telegram, a self-hosted server, a test fake)."""
    token = settings.telegram.bot_token
    if token is None:
        raise StartupError("TELEGRAM_BOT_TOKEN is not set")
    session = BotApiSession(api=TelegramAPIServer.from_base(settings.telegram.api_base_url))
    return Bot(token=token.get_secret_value(), session=session)


async def run_bot(
    settings: Settings,
    mode: Mode,
    stop: asyncio.Event,
    *,
    llm: ToolCallingClient | None = None,
) -> int:
    """Run until ``stop`` is set, then shut down gracefully; returns the exit code."""
    try:
        app = await build_application(settings, llm=llm)
    except StartupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    bot = create_bot(settings)
    try:
        front = build_dispatcher(settings, chat_service=app.chat, redis=app.redis)
        if not await _prepare_bot(bot, app, mode):
            return 1
        if mode == "webhook":
            await _serve_webhook(bot, front, app, stop)
        else:
            await _serve_polling(bot, front, stop)
            await _drain(front, settings.telegram.shutdown_grace_seconds)
    finally:
        # The bot's session first (no more sends), then the engine in reverse order.
        await bot.session.close()
        await app.aclose()
    logger.info("Stopped")
    return 0


async def _prepare_bot(bot: Bot, app: Application, mode: Mode) -> bool:
    """Check the token against the Bot API and register the command menu."""
    settings = app.settings
    try:
        me = await bot.get_me()
        await bot.set_my_commands(
            [BotCommand(command=name, description=text) for name, text in messages.COMMANDS]
        )
    except TelegramUnauthorizedError:
        print("error: the Bot API rejected TELEGRAM_BOT_TOKEN (unauthorized)", file=sys.stderr)
        return False
    except TelegramAPIError as error:
        print(
            f"error: the Bot API at {settings.telegram.api_base_url} failed: "
            f"{type(error).__name__}",
            file=sys.stderr,
        )
        return False
    logger.info(
        "Bot @%s starting (%s): backend=%s model=%s prompt=%s %s redis=%s api=%s",
        me.username,
        mode,
        settings.llm.backend,
        app.llm.model_name,
        app.chat.prompt.prompt_id,
        app.chat.prompt.version,
        describe_target(settings.redis),
        settings.telegram.api_base_url,
    )
    return True


async def _serve_polling(bot: Bot, front: TelegramFrontEnd, stop: asyncio.Event) -> None:
    dispatcher = front.dispatcher
    # getUpdates answers 409 while a webhook is set; polling takes over from it.
    await bot.delete_webhook(drop_pending_updates=False)
    polling = asyncio.create_task(
        dispatcher.start_polling(
            bot,
            handle_signals=False,
            close_bot_session=False,
            allowed_updates=dispatcher.resolve_used_update_types(),
        )
    )
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({polling, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not polling.done():
        await dispatcher.stop_polling()
    stopping.cancel()
    with suppress(asyncio.CancelledError):
        await stopping
    await polling


async def _serve_webhook(
    bot: Bot, front: TelegramFrontEnd, app: Application, stop: asyncio.Event
) -> None:
    settings = app.settings
    webhook = settings.webhook
    secret = webhook.secret.get_secret_value() if webhook.secret else ""
    receiver = WebhookReceiver(front.dispatcher, bot, secret=secret)
    web_app = web.Application()
    web_app.router.add_post(webhook.path, receiver.handle)
    web_app.router.add_get(
        HEALTH_PATH, HealthEndpoint(app.health, app.audit, front.in_flight).handle
    )
    runner = web.AppRunner(web_app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, webhook.host, webhook.port)
    try:
        await site.start()
        # Every process registers the same URL: several of them behind one load
        # balancer is the way to scale, and none removes the webhook when it stops.
        await bot.set_webhook(
            url=webhook_public_url(settings),
            secret_token=secret,
            allowed_updates=front.dispatcher.resolve_used_update_types(),
        )
        logger.info("Webhook listening on %s:%s%s", webhook.host, webhook.port, webhook.path)
        await stop.wait()
    finally:
        # Stop taking updates; the turns already started are drained by the caller.
        await site.stop()
        await _drain(front, settings.telegram.shutdown_grace_seconds)
        await runner.cleanup()


async def _drain(front: TelegramFrontEnd, grace_seconds: float) -> None:
    in_flight = front.in_flight.in_flight
    if in_flight:
        logger.info("Waiting up to %.0f s for %d update(s) in flight", grace_seconds, in_flight)
    if not await front.in_flight.wait_idle(grace_seconds):
        cancelled = await front.in_flight.cancel_all()
        logger.warning("Shutdown grace ran out: %d update(s) cancelled", cancelled)


async def _run_until_signalled(settings: Settings, mode: Mode) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        return await run_bot(settings, mode, stop)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def main(mode: Mode) -> int:
    """``python -m bot [polling|webhook]``: 2 on bad settings, 1 on failed start-up, else 0."""
    settings = load_settings()
    if settings is None:
        return 2
    problems = settings_problems(settings, mode)
    if problems:
        for problem in problems:
            print(f"configuration error: {problem}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    return asyncio.run(_run_until_signalled(settings, mode))
