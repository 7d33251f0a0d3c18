"""Updates as Telegram sent them: fetched raw, parsed one at a time, described without content.

aiogram's ``GetUpdates`` validates a whole batch at once: one update its models
reject (a field a newer Bot API added, a malformed fixture) fails the batch, and
the same batch comes back on every poll. Fetching the batch as plain JSON and
parsing each update on its own keeps one bad update from stopping the others;
it is dropped with a log line naming its kind and id only (a validation error
quotes its input, which may be a customer's text).
"""

import logging
import re
from collections.abc import Mapping
from typing import Any

from aiogram import Bot
from aiogram.methods.base import TelegramMethod
from aiogram.types import Update
from pydantic import ValidationError

logger = logging.getLogger(__name__)

# An update kind is a field name such as "message"; anything else is not logged.
_KIND = re.compile(r"[a-z_]{1,32}")


class GetRawUpdates(TelegramMethod[list[dict[str, Any]]]):
    """``getUpdates`` whose result is left as JSON objects, to be parsed one by one."""

    __returning__ = list[dict[str, Any]]
    __api_method__ = "getUpdates"

    offset: int | None = None
    limit: int | None = None
    timeout: int | None = None
    allowed_updates: list[str] | None = None


def parse_update(raw: Mapping[str, Any], bot: Bot, *, source: str) -> Update | None:
    """``raw`` as an :class:`Update`; ``None`` (after one log line) when it is not one.

    Raises ``RecursionError`` for a body nested deeper than the parser goes.
    """
    try:
        return Update.model_validate(raw, context={"bot": bot})
    except ValidationError:
        update_id = update_id_of(raw)
        logger.warning(
            "%s is not an Update (kind %s, update id %s); dropped",
            source,
            update_kind(raw),
            "none" if update_id is None else update_id,
        )
        return None


def update_kind(raw: Mapping[str, Any]) -> str:
    """The update's kind(s) (``message``...), from its field names only."""
    kinds = sorted(key for key in raw if key != "update_id" and _KIND.fullmatch(str(key)))
    return ",".join(kinds[:3]) or "none"


def update_id_of(raw: Mapping[str, Any]) -> int | None:
    """The update's id, when it has a whole number for one."""
    value = raw.get("update_id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
