"""A file a customer sent, fetched through the Bot API (``getFile``, then the file's URL).

Voice messages and photos are kept as their updates (``file_id``), never as bytes;
the worker fetches the bytes here when it runs the turn, and only then.
"""

import logging
from enum import StrEnum
from io import BytesIO

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiohttp import ClientError

logger = logging.getLogger(__name__)

BOT_API_DOWNLOAD_LIMIT_BYTES = 20 * 1024 * 1024
"""The largest file a bot may download through the Bot API (``getFile``)."""

DOWNLOAD_TIMEOUT_SECONDS = 30.0
"""How long one file's download may take."""


class DownloadFailure(StrEnum):
    """Why a file's bytes could not be had."""

    TOO_LARGE = "too_large"
    UNREADABLE = "unreadable"


async def download(
    bot: Bot,
    file_id: str,
    *,
    max_bytes: int,
    timeout_seconds: float = DOWNLOAD_TIMEOUT_SECONDS,
    what: str = "File",
) -> bytes | DownloadFailure:
    """The file's bytes, or why not: over ``max_bytes`` (checked before and after), gone,
    refused or empty. ``what`` names it in the log line (never its content or id)."""
    try:
        file = await bot.get_file(file_id)
        if file.file_size is not None and file.file_size > max_bytes:
            return DownloadFailure.TOO_LARGE
        if file.file_path is None:
            return DownloadFailure.UNREADABLE
        buffer = BytesIO()
        await bot.download_file(file.file_path, destination=buffer, timeout=int(timeout_seconds))
    except TelegramAPIError as error:
        # "file is too big" is the Bot API's own word for its 20 MB limit.
        too_big = "too big" in str(error).lower()
        logger.warning("%s not downloaded: %s", what, type(error).__name__)
        return DownloadFailure.TOO_LARGE if too_big else DownloadFailure.UNREADABLE
    except (ClientError, TimeoutError, OSError) as error:
        logger.warning("%s not downloaded: %s", what, type(error).__name__)
        return DownloadFailure.UNREADABLE
    content = buffer.getvalue()
    if not content:
        return DownloadFailure.UNREADABLE
    return content if len(content) <= max_bytes else DownloadFailure.TOO_LARGE
