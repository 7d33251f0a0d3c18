"""What the Telegram modes need of the settings, checked before aiogram is imported.

Importing aiogram takes seconds (its Bot API types); a missing token or a bad
``REDIS_URL`` is reported at once, every problem on its own line, and only a
usable configuration pays for the import (see ``bench/README.md``).
"""

import contextlib
import os
import re
import socket
from collections.abc import Callable, Mapping
from typing import Literal

from pydantic_settings import BaseSettings

from bot.settings import (
    HealthSettings,
    RedisSettings,
    Settings,
    TelegramSettings,
    WebhookSettings,
)

Mode = Literal["polling", "webhook", "worker"]

# Telegram's rule for the webhook secret token.
_SECRET_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,256}$")


def token_is_well_formed(token: str) -> bool:
    """``<digits>:<secret>`` without blanks: the shape aiogram's ``Bot`` accepts."""
    bot_id, separator, secret = token.partition(":")
    return (
        bool(separator)
        and bot_id.isdigit()
        and bool(secret)
        and not any(character.isspace() for character in token)
    )


def listen_problem(host: str, port: int) -> str | None:
    """Why nothing could listen on ``host:port`` now (a port taken, an address not ours).

    Bound and released at once, with the address reuse aiohttp's server sets (a
    port left in TIME_WAIT by a stopped bot is free). The server binds it again
    later; a port taken in between is still reported then.
    """
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as error:
        return f"cannot be resolved: {error}"
    for family, kind, protocol, _, address in addresses:
        try:
            with socket.socket(family, kind, protocol) as probe:
                if os.name == "posix":
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    with contextlib.suppress(OSError):
                        probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind(address)
                probe.listen()
        except OSError as error:
            reason = os.strerror(error.errno) if error.errno else str(error)
            return f"cannot listen there: {reason}"
    return None


def port_problems(
    health: HealthSettings | None, webhook: WebhookSettings | None, mode: Mode
) -> list[str]:
    """A port the mode's server must take that is taken (checked before any connection)."""
    if mode == "webhook" and webhook is not None:
        problem = listen_problem(webhook.host, webhook.port)
        if problem is not None:
            return [f"WEBHOOK_HOST:WEBHOOK_PORT {webhook.host}:{webhook.port} {problem}"]
    # Unset, HEALTH_PORT is the first free one of a range; 0 is any free port.
    if mode != "webhook" and health is not None and health.port:
        problem = listen_problem(health.host, health.port)
        if problem is not None:
            return [f"HEALTH_HOST:HEALTH_PORT {health.host}:{health.port} {problem}"]
    return []


def section_problems(
    telegram: TelegramSettings | None,
    webhook: WebhookSettings | None,
    mode: Mode,
    redis: RedisSettings | None = None,
    health: HealthSettings | None = None,
) -> list[str]:
    """What makes these sections unusable for ``mode`` (never quoting a secret).

    A section that is ``None`` did not load: its own problems are reported already.
    """
    problems = []
    if redis is not None and not redis.url_is_set and redis.mode == "standalone":
        # A production process never invents its Redis: localhost:6379 may be anybody's.
        problems.append(
            "REDIS_URL is not set: the bot's Redis, e.g. redis://localhost:6379/0 "
            "(only the console and the audit CLI start a private one)"
        )
    if telegram is not None:
        token = telegram.bot_token.get_secret_value() if telegram.bot_token else ""
        if not token.strip():
            problems.append("TELEGRAM_BOT_TOKEN is not set: put the token from @BotFather in .env")
        elif not token_is_well_formed(token):
            problems.append(
                "TELEGRAM_BOT_TOKEN is malformed: expected <digits>:<secret> as @BotFather gives it"
            )
    if mode == "webhook" and webhook is not None:
        if not webhook.url:
            problems.append("WEBHOOK_URL is not set: the public HTTPS URL Telegram posts to")
        secret = webhook.secret.get_secret_value() if webhook.secret else ""
        if not _SECRET_TOKEN.match(secret):
            problems.append(
                "WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and - in webhook mode"
            )
        if not webhook.path.startswith("/"):
            problems.append("WEBHOOK_PATH must start with /")
    # A port only once the rest is usable: which one is free is the start's last question.
    return problems or port_problems(health, webhook, mode)


def settings_problems(settings: Settings, mode: Mode) -> list[str]:
    """What makes these settings unusable for ``mode`` (never quoting a secret)."""
    return section_problems(settings.telegram, settings.webhook, mode, settings.redis)


def mode_check(mode: Mode) -> Callable[[Mapping[str, BaseSettings]], list[str]]:
    """The check :func:`bot.ops.startup.load_settings` runs on the sections that loaded."""

    def check(sections: Mapping[str, BaseSettings]) -> list[str]:
        telegram = sections.get("telegram")
        webhook = sections.get("webhook")
        redis = sections.get("redis")
        health = sections.get("health")
        return section_problems(
            telegram if isinstance(telegram, TelegramSettings) else None,
            webhook if isinstance(webhook, WebhookSettings) else None,
            mode,
            redis if isinstance(redis, RedisSettings) else None,
            health if isinstance(health, HealthSettings) else None,
        )

    return check
