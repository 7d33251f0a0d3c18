"""Running the bot: settings check, start-up, polling, webhook or worker, graceful shutdown.

Start-up order: settings (exit 2 on a bad or missing token, before any
connection), the network checks of :mod:`bot.telegram.preflight` (Redis must
answer, the Bot API must accept the token, the staff group must be usable: exit
1 otherwise; ``python -m bot`` runs them before this module and aiogram are
imported), the engine, the command menu and the bot's own name (``getMe``), the
Redis scripts loaded, the start-up collection, the start-up line, then updates. Every mode
runs workers (:mod:`bot.queue.worker`); ``polling`` and ``webhook`` also take
updates in (intake). Shutdown on SIGINT/SIGTERM: stop taking updates, stop
claiming chats, let the jobs in hand finish within
``TELEGRAM_SHUTDOWN_GRACE_SECONDS`` and hand the rest back to Redis for
another worker, close the bot's HTTP session, then the engine.
"""

import asyncio
import errno
import logging
import os
import signal
import sys
from collections.abc import Mapping
from contextlib import suppress

from aiogram import Bot
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import (
    ClientDecodeError,
    TelegramAPIError,
    TelegramNetworkError,
    TelegramUnauthorizedError,
)
from aiogram.types import BotCommand
from aiohttp import web
from redis.exceptions import RedisClusterException, RedisError

from bot import customer_texts
from bot.accounts.feature import AccountsFeature
from bot.app import Application, build_application
from bot.llm.types import ToolCallingClient
from bot.mcp.feature import McpFeature
from bot.ops import event_loop
from bot.ops.heap import settle_start_up_heap
from bot.ops.log_context import chat_namer, name_chats
from bot.ops.startup import (
    StartupError,
    configure_logging,
    configured_secrets,
    load_settings,
)
from bot.ops.supervision import SupervisionPolicy, TaskSupervisor
from bot.proxies import ProxyURLError, proxy_for
from bot.queue.work_stream import BacklogGauge, WorkStream
from bot.settings import DEFAULT_HEALTH_PORT, HEALTH_PORT_SEARCH, Settings
from bot.storage.connection import describe_target
from bot.storage.redaction import redacted_url
from bot.storage.scripts.base import load_scripts
from bot.telegram.assembly import build_telegram_side
from bot.telegram.bot_api_session import BotApiSession
from bot.telegram.dispatcher import TelegramFrontEnd
from bot.telegram.health import HEALTH_PATH, HealthEndpoint
from bot.telegram.metrics_endpoint import METRICS_PATH, MetricsEndpoint
from bot.telegram.polling import Poller
from bot.telegram.preflight import BotIdentity, preflight
from bot.telegram.startup_checks import Mode, mode_check
from bot.telegram.update_intake import TelegramIntake
from bot.telegram.webhook import WebhookReceiver

logger = logging.getLogger(__name__)


def webhook_public_url(settings: Settings) -> str:
    """What Telegram posts to: ``WEBHOOK_URL`` (scheme and host) plus ``WEBHOOK_PATH``."""
    return f"{(settings.webhook.url or '').rstrip('/')}{settings.webhook.path}"


def create_bot(settings: Settings, environ: Mapping[str, str] | None = None) -> Bot:
    """A Bot talking to ``TELEGRAM_API_BASE_URL`` (Telegram, a self-hosted server, a test fake).

    Through ``TELEGRAM_PROXY``, else the proxy the standard variables in ``environ``
    (``os.environ`` by default) give for that URL; raises :class:`StartupError`.
    """
    telegram = settings.telegram
    token = telegram.bot_token
    if token is None:
        raise StartupError("TELEGRAM_BOT_TOKEN is not set")
    configured = telegram.proxy.get_secret_value() if telegram.proxy is not None else None
    try:
        proxy = proxy_for(
            telegram.api_base_url, configured, os.environ if environ is None else environ
        )
    except ProxyURLError as error:
        raise StartupError(str(error)) from error
    api = TelegramAPIServer.from_base(telegram.api_base_url)
    session = BotApiSession(api=api) if proxy is None else BotApiSession(api=api, proxy=proxy)
    return Bot(token=token.get_secret_value(), session=session)


async def run_bot(  # noqa: PLR0912 - every start-up step that can fail returns 1
    settings: Settings,
    mode: Mode,
    stop: asyncio.Event,
    *,
    llm: ToolCallingClient | None = None,
    identity: BotIdentity | None = None,
    settle_heap: bool = False,
) -> int:
    """Run until ``stop`` is set, then shut down gracefully; returns the exit code.

    ``identity`` is what :func:`bot.telegram.preflight.preflight` found before this
    module was imported; without it (an in-process bot) the same checks run here.
    ``settle_heap``: once ready, set start-up's objects aside from garbage collection
    (:func:`bot.ops.heap.settle_start_up_heap`); a process of its own does, a bot run
    inside another program (a test) leaves that program's heap alone.
    """
    # Log text names chats by the pseudonym the ``chat`` field carries, never by id.
    key = settings.audit.hmac_key
    name_chats(chat_namer(key.get_secret_value().encode() if key is not None else None))
    try:
        if identity is None:
            identity = await preflight(settings)
        app = await build_application(settings, llm=llm)
    except StartupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        bot = create_bot(settings)
    except StartupError as error:
        await app.aclose()
        print(f"error: {error}", file=sys.stderr)
        return 1
    tasks = build_supervisor(settings, stop)
    try:
        side = build_telegram_side(app, bot, tasks=tasks)
        front, intake, workers = side.front, side.intake, side.workers
        if not await _prepare_bot(bot, app):
            return 1
        await _ready(app, mode, identity, settle_heap=settle_heap)
        working = asyncio.create_task(workers.run(), name="workers")
        sweeping = [
            (sweeper, tasks.spawn(name, sweeper.run, stop=stop))
            for name, sweeper in side.named_sweepers
        ]
        try:
            if mode == "webhook":
                if not await _serve_webhook(bot, front, app, intake, stop, tasks=tasks):
                    return 1
            else:
                health = await _start_health_server(front, app, tasks)
                if health is None:
                    return 1
                try:
                    if mode == "polling":
                        await _serve_polling(bot, front, intake, stop, tasks=tasks)
                    else:
                        logger.info("Worker running (no intake)")
                        await _until(stop, working)
                finally:
                    await health.cleanup()
        finally:
            # No task starts again from now on; the workers finish or hand back their chats.
            tasks.stop()
            workers.stop()
            await working
            for sweeper, task in sweeping:
                sweeper.stop()
                await task
    finally:
        # The bot's session first (no more sends), then the engine in reverse order.
        await bot.session.close()
        await app.aclose()
    return _stopped(tasks)


def _stopped(tasks: TaskSupervisor) -> int:
    """Log the stop; the exit code: 1 when a task was given up (its supervisor restarts us)."""
    if tasks.failure is not None:
        logger.error("Stopped: %s could not be restarted; exit code 1", tasks.failure.task)
        return 1
    logger.info("Stopped")
    return 0


def build_supervisor(settings: Settings, stop: asyncio.Event) -> TaskSupervisor:
    """The supervisor of this process's long-lived tasks; a task given up sets ``stop``."""
    supervision = settings.supervision
    return TaskSupervisor(
        policy=SupervisionPolicy(
            backoff_max_seconds=supervision.backoff_max_seconds,
            max_restarts=supervision.max_restarts,
            restart_window_seconds=supervision.restart_window_seconds,
        ),
        on_failure=lambda _failure: stop.set(),
    )


async def _until(stop: asyncio.Event, task: "asyncio.Task[None]") -> None:
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({stopping, task}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    with suppress(asyncio.CancelledError):
        await stopping


async def _prepare_bot(bot: Bot, app: Application) -> bool:
    """Register the command menu (the token and the staff group were checked by the preflight).

    The model is probed meanwhile: a wrong key or model is found now, without failing
    the start (``/healthz`` says degraded and why). aiogram's own ``bot.me()`` is
    asked once here: the handlers read the bot's name from it, and a first burst's
    turns would otherwise each call ``getMe`` before the first answer is kept (100
    calls in a burst of 300 customers).
    """
    settings = app.settings
    app.model_health.start()
    method = "setMyCommands"
    try:
        linking = (
            (customer_texts.LINK_COMMAND,) if app.features.get(AccountsFeature) is not None else ()
        )
        default = settings.language.default_language
        # The default language's menu for everyone, then one per other enabled language
        # for the customers whose Telegram is set to it.
        for code in (default, *(c for c in settings.language.codes if c != default)):
            texts = app.languages.texts(code)
            await bot.set_my_commands(
                [
                    BotCommand(command=name, description=texts.gettext(text))
                    for name, text in (*customer_texts.COMMANDS, *linking)
                ],
                language_code=None if code == default else code,
            )
        method = "getMe"
        await bot.me()
    except TelegramUnauthorizedError:
        print("error: the Bot API rejected TELEGRAM_BOT_TOKEN (unauthorized)", file=sys.stderr)
        return False
    except (TelegramAPIError, ClientDecodeError) as error:
        print(f"error: {_bot_api_failure(error, settings, method)}", file=sys.stderr)
        return False
    return True


async def _ready(app: Application, mode: Mode, identity: BotIdentity, *, settle_heap: bool) -> None:
    """Load the Redis scripts, set start-up's objects aside (``settle_heap``), log the line.

    The line says the process takes work: one waited for meets a process whose
    scripts are in Redis's cache and whose start-up collection is done (a first
    burst paid for both otherwise, bench/README.md "Issue 49: bursts against the
    floor bot"). Redis unavailable here is no reason not to start: the scripts are
    then loaded by their first calls, as before.
    """
    try:
        await load_scripts(app.redis)
    except (RedisError, RedisClusterException, OSError) as error:
        logger.warning("Redis scripts not loaded at start (%s)", type(error).__name__)
    if settle_heap:
        settle_start_up_heap()
    settings = app.settings
    logger.info(
        "Bot @%s starting (%s): backend=%s model=%s prompt=%s %s redis=%s api=%s",
        identity.username,
        mode,
        settings.llm.backend,
        app.llm.model_name,
        app.chat.prompt.prompt_id,
        app.chat.prompt.version,
        describe_target(settings.redis),
        settings.telegram.api_base_url,
    )


def _bot_api_failure(
    error: TelegramAPIError | ClientDecodeError, settings: Settings, method: str
) -> str:
    """One line for the operator: where, and why ``method`` failed, without the token."""
    where = redacted_url(settings.telegram.api_base_url)
    if isinstance(error, ClientDecodeError):
        reason = f"{type(error.original).__name__}: {_one_line(str(error.original))}"
        line = (
            f"TELEGRAM_API_BASE_URL {where} is not a Bot API server: its answer to {method} "
            f"was not Bot API JSON ({reason})"
        )
    elif isinstance(error, TelegramNetworkError):
        cause = error.__cause__
        reason = f"{type(cause).__name__}: {_one_line(str(cause))}" if cause else error.message
        line = f"cannot reach the Bot API at {where}: {_one_line(reason)}"
    else:
        line = (
            f"the Bot API at {where} refused {method}: {type(error).__name__}: "
            f"{_one_line(error.message)}"
        )
    return _without_token(line, settings)


def _without_token(line: str, settings: Settings) -> str:
    """``line`` with the bot token (which Bot API URLs carry) masked."""
    token = settings.telegram.bot_token
    if token is not None and token.get_secret_value():
        return line.replace(token.get_secret_value(), "***")
    return line


def _set_webhook_failure(
    error: TelegramAPIError | ClientDecodeError, settings: Settings, url: str
) -> str:
    """One line: why setWebhook failed (Telegram's own words when it refused the URL)."""
    if isinstance(error, ClientDecodeError | TelegramNetworkError):
        return _bot_api_failure(error, settings, "setWebhook")
    line = (
        f"the Bot API refused setWebhook for {url}: {type(error).__name__}: "
        f"{_one_line(error.message)}"
    )
    return _without_token(line, settings)


def _os_reason(error: OSError) -> str:
    """The OS's words for a failed bind or name lookup, without asyncio's wrapping."""
    if error.errno is not None and error.errno > 0:
        return os.strerror(error.errno)
    return _one_line(error.strerror or str(error))


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


async def _serve_polling(
    bot: Bot,
    front: TelegramFrontEnd,
    intake: TelegramIntake,
    stop: asyncio.Event,
    *,
    tasks: TaskSupervisor,
) -> None:
    # getUpdates answers 409 while a webhook is set; polling takes over from it.
    await bot.delete_webhook(drop_pending_updates=False)
    poller = Poller(
        bot=bot, intake=intake, allowed_updates=front.dispatcher.resolve_used_update_types()
    )
    polling = asyncio.create_task(tasks.run("polling", poller.run, stop=stop), name="polling")
    await _until(stop, polling)
    poller.stop()
    await polling


async def _serve_webhook(
    bot: Bot,
    front: TelegramFrontEnd,
    app: Application,
    intake: TelegramIntake,
    stop: asyncio.Event,
    *,
    tasks: TaskSupervisor,
) -> bool:
    """Serve the webhook until ``stop``; ``False`` (after one line on stderr) if it cannot start."""
    settings = app.settings
    webhook = settings.webhook
    secret = webhook.secret.get_secret_value() if webhook.secret else ""
    receiver = WebhookReceiver(
        intake=intake, bot=bot, secret=secret, body_timeout_seconds=webhook.body_timeout_seconds
    )
    web_app = _observability_app(front, app, tasks)
    web_app.router.add_post(webhook.path, receiver.handle)
    # aiohttp closes a connection that has not sent a whole request by the keep-alive
    # deadline (counted from connect): that is the header read timeout. No lingering
    # after an answer to an unread body (a 408, a 401): it would wait 10 s more on it.
    runner = web.AppRunner(
        web_app,
        handle_signals=False,
        access_log=None,
        keepalive_timeout=webhook.header_timeout_seconds,
        lingering_time=0,
    )
    await runner.setup()
    site = web.TCPSite(runner, webhook.host, webhook.port)
    try:
        try:
            await site.start()
        except OSError as error:
            print(
                f"error: cannot listen on WEBHOOK_HOST:WEBHOOK_PORT {webhook.host}:{webhook.port}: "
                f"{_os_reason(error)}",
                file=sys.stderr,
            )
            return False
        # Every process registers the same URL: several of them behind one load
        # balancer is the way to scale, and none removes the webhook when it stops.
        url = webhook_public_url(settings)
        try:
            await bot.set_webhook(
                url=url,
                secret_token=secret,
                allowed_updates=front.dispatcher.resolve_used_update_types(),
            )
        except (TelegramAPIError, ClientDecodeError) as error:
            print(f"error: {_set_webhook_failure(error, settings, url)}", file=sys.stderr)
            return False
        logger.info("Webhook listening on %s:%s%s", webhook.host, webhook.port, webhook.path)
        await stop.wait()
        return True
    finally:
        # Stop taking updates; the workers finish or hand back what they hold.
        await site.stop()
        await runner.cleanup()


def _observability_app(
    front: TelegramFrontEnd, app: Application, tasks: TaskSupervisor
) -> web.Application:
    """An aiohttp application serving ``/healthz`` and ``/metrics``."""
    web_app = web.Application()
    mcp = app.features.get(McpFeature)
    web_app.router.add_get(
        HEALTH_PATH,
        HealthEndpoint(
            probe=app.health,
            audit=app.audit,
            in_flight=front.in_flight,
            work=WorkStream(
                app.health_redis, stream=app.keys.work_stream, consumer=app.work.consumer
            ),
            tasks=tasks,
            mcp_down=mcp.servers.degraded if mcp is not None else lambda: (),
            mcp_detail=mcp.servers.down_reasons if mcp is not None else lambda: {},
            model=app.model_health.reading,
        ).handle,
    )
    depth = BacklogGauge(app.work)
    app.metrics.observe_queue_depth(lambda: depth.chats)
    web_app.router.add_get(
        METRICS_PATH, MetricsEndpoint(app.metrics.registry, before_scrape=depth.refresh).handle
    )
    return web_app


async def _start_health_server(
    front: TelegramFrontEnd, app: Application, tasks: TaskSupervisor
) -> web.AppRunner | None:
    """``/healthz`` and ``/metrics`` of polling and worker modes on ``HEALTH_HOST:HEALTH_PORT``.

    With ``HEALTH_PORT`` unset, the first free port from ``DEFAULT_HEALTH_PORT`` on
    (a poller and a worker on one host both start). ``None`` (after one line on
    stderr) when no port can be taken.
    """
    health = app.settings.health
    if health.port is not None:
        ports = [health.port]
    else:
        ports = list(range(DEFAULT_HEALTH_PORT, DEFAULT_HEALTH_PORT + HEALTH_PORT_SEARCH))
    runner = web.AppRunner(
        _observability_app(front, app, tasks), handle_signals=False, access_log=None
    )
    await runner.setup()
    for port in ports:
        site = web.TCPSite(runner, health.host, port)
        try:
            await site.start()
            break
        except OSError as error:
            await site.stop()
            if error.errno == errno.EADDRINUSE and port != ports[-1]:
                continue
            await runner.cleanup()
            reason = _os_reason(error)
            tried = str(port) if len(ports) == 1 else f"{ports[0]}-{ports[-1]}"
            print(
                f"error: cannot listen on HEALTH_HOST:HEALTH_PORT {health.host}:{tried}: {reason}",
                file=sys.stderr,
            )
            return None
    port = runner.addresses[0][1] if runner.addresses else ports[-1]
    logger.info(
        "Health and metrics on http://%s:%s%s and %s", health.host, port, HEALTH_PATH, METRICS_PATH
    )
    return runner


async def _run_until_signalled(settings: Settings, mode: Mode, identity: BotIdentity | None) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        return await run_bot(settings, mode, stop, identity=identity, settle_heap=True)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def main(mode: Mode) -> int:
    """``python -m bot polling|webhook|worker``: 2 on bad settings, 1 on failed start-up."""
    settings = load_settings(mode_check(mode))
    if settings is None:
        return 2
    return start(settings, mode)


def start(settings: Settings, mode: Mode, identity: BotIdentity | None = None) -> int:
    """Run ``mode`` with settings that passed :func:`mode_check`, until SIGINT or SIGTERM.

    ``identity``: the preflight already ran (``python -m bot``); else it runs first.
    """
    configure_logging(
        settings.log_level, settings.log_format, configured_secrets(settings, os.environ)
    )
    return event_loop.run(_run_until_signalled(settings, mode, identity))
