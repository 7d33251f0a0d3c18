"""What the Telegram modes need of the settings, checked before aiogram is imported.

Importing aiogram takes seconds (its Bot API types); a missing token or a bad
``REDIS_URL`` is reported at once, every problem on its own line, and only a
usable configuration pays for the import (see ``bench/README.md``).
"""

import re
from collections.abc import Callable, Mapping
from typing import Literal

from pydantic_settings import BaseSettings

from bot.settings import RedisSettings, Settings, TelegramSettings, WebhookSettings

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


def section_problems(
    telegram: TelegramSettings | None,
    webhook: WebhookSettings | None,
    mode: Mode,
    redis: RedisSettings | None = None,
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
    return problems


def settings_problems(settings: Settings, mode: Mode) -> list[str]:
    """What makes these settings unusable for ``mode`` (never quoting a secret)."""
    return section_problems(settings.telegram, settings.webhook, mode, settings.redis)


def mode_check(mode: Mode) -> Callable[[Mapping[str, BaseSettings]], list[str]]:
    """The check :func:`bot.ops.startup.load_settings` runs on the sections that loaded."""

    def check(sections: Mapping[str, BaseSettings]) -> list[str]:
        telegram = sections.get("telegram")
        webhook = sections.get("webhook")
        redis = sections.get("redis")
        return section_problems(
            telegram if isinstance(telegram, TelegramSettings) else None,
            webhook if isinstance(webhook, WebhookSettings) else None,
            mode,
            redis if isinstance(redis, RedisSettings) else None,
        )

    return check
