"""A photo (or an image file) for the model: the largest size within ``IMAGE_MAX_BYTES``.

As with voice messages, only the update (the photo's ``file_id``s) is durable:
the worker holding the chat downloads the image each time it runs the job and
hands it to the turn as a data URL, which goes to the model in that request only.
The history keeps Telegram's file ids and a marker, never the bytes.
"""

import base64
import logging
from dataclasses import dataclass
from enum import StrEnum

from aiogram import Bot
from aiogram.types import Message

from bot.metrics import BotMetrics
from bot.settings import Settings
from bot.telegram.files import DOWNLOAD_TIMEOUT_SECONDS, DownloadFailure, download
from turn import ImagePart

logger = logging.getLogger(__name__)

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif"})
"""Image files the model takes (OpenAI's vision input formats); other documents are files."""


class PhotoRefusal(StrEnum):
    """Why a photo did not reach the model (the metrics' ``reason``)."""

    VISION_OFF = "vision_off"
    TOO_LARGE = "too_large"
    UNREADABLE = "unreadable"
    # A caption over ``MESSAGE_MAX_CHARS``: no image is downloaded for it.
    CAPTION_TOO_LONG = "caption_too_long"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Image:
    file_id: str
    file_size: int | None
    mime_type: str


def vision_on(settings: Settings) -> bool:
    """Whether photos go to the model: ``VISION=on`` and a real model (not the offline demo)."""
    return settings.media.vision == "on" and settings.llm.backend != "offline"


def is_image(message: Message) -> bool:
    """Whether ``message`` is a photo or an image file (a document of an image type)."""
    if message.photo:
        return True
    document = message.document
    return document is not None and (document.mime_type or "") in IMAGE_TYPES


@dataclass(frozen=True, kw_only=True)
class Photos:
    """Downloads a message's image for the model; refuses with ``vision`` off or too large."""

    vision: bool
    max_bytes: int
    metrics: BotMetrics
    max_caption_chars: int
    """A turn's caption at most (``MESSAGE_MAX_CHARS``, as a typed message)."""
    download_timeout_seconds: float = DOWNLOAD_TIMEOUT_SECONDS

    async def look(self, bot: Bot, message: Message) -> ImagePart | PhotoRefusal:
        """The image of ``message`` as the model will see it, or why not (counted)."""
        result = await self._look(bot, message)
        if isinstance(result, PhotoRefusal):
            self.metrics.record_media_refusal("photo", result.value)
        else:
            self.metrics.images_to_model.inc()
        return result

    def file_id_for_history(self, message: Message) -> str | None:
        """The file id a turn would keep for ``message`` (the size chosen), or ``None``."""
        image = self._choose(message)
        return None if isinstance(image, PhotoRefusal) else image.file_id

    def caption_refused(self, caption: str) -> bool:
        """Whether a turn's caption is over the limit (counted); only with vision on.

        Without vision the caption is never read: the photo's refusal says it all.
        """
        if not self.vision or len(caption.strip()) <= self.max_caption_chars:
            return False
        self.metrics.record_media_refusal("photo", PhotoRefusal.CAPTION_TOO_LONG.value)
        return True

    async def _look(self, bot: Bot, message: Message) -> ImagePart | PhotoRefusal:
        if not self.vision:
            return PhotoRefusal.VISION_OFF
        image = self._choose(message)
        if isinstance(image, PhotoRefusal):
            return image
        content = await self._download(bot, image)
        if isinstance(content, PhotoRefusal):
            return content
        encoded = base64.b64encode(content).decode("ascii")
        return ImagePart(file_id=image.file_id, data_url=f"data:{image.mime_type};base64,{encoded}")

    def _choose(self, message: Message) -> _Image | PhotoRefusal:
        """The largest photo size within the limit; an image file if within it."""
        if message.photo:
            fitting = [
                size
                for size in message.photo
                if size.file_size is None or size.file_size <= self.max_bytes
            ]
            if not fitting:
                return PhotoRefusal.TOO_LARGE
            largest = max(fitting, key=lambda size: size.width * size.height)
            return _Image(
                file_id=largest.file_id, file_size=largest.file_size, mime_type="image/jpeg"
            )
        document = message.document
        if document is None or (document.mime_type or "") not in IMAGE_TYPES:
            return PhotoRefusal.UNREADABLE
        if document.file_size is not None and document.file_size > self.max_bytes:
            return PhotoRefusal.TOO_LARGE
        return _Image(
            file_id=document.file_id,
            file_size=document.file_size,
            mime_type=document.mime_type or "image/jpeg",
        )

    async def _download(self, bot: Bot, image: _Image) -> bytes | PhotoRefusal:
        got = await download(
            bot,
            image.file_id,
            max_bytes=self.max_bytes,
            timeout_seconds=self.download_timeout_seconds,
            what="Image",
        )
        return PhotoRefusal(got.value) if isinstance(got, DownloadFailure) else got
