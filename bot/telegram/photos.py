"""A photo (or an image file) for the model: the largest size within ``IMAGE_MAX_BYTES``.

As with voice messages, only the update (the photo's ``file_id``s) is durable:
the worker holding the chat downloads the image each time it runs the job and
hands it to the turn as a data URL, which goes to the model in that request only.
The history keeps Telegram's file ids and a marker, never the bytes.

Every model call of the turn carries its images, so an album has a total
(``IMAGE_TURN_MAX_BYTES``) besides the per-image cap: :meth:`Photos.look_all`
plans the album from the sizes Telegram reports before anything is downloaded.
Each image first gets its smallest size (an image file has only one), in the
album's order, while the total allows; then each, in order, the largest size the
rest of the total still allows. What does not fit at all is left out and
counted (``over_turn_budget``); the turn tells the model how many were left out
or taken smaller, so that its answer can say so.
"""

import base64
import logging
from collections.abc import Sequence
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
    # Past the turn's total (``IMAGE_TURN_MAX_BYTES``): left out of an album's turn.
    OVER_TURN_BUDGET = "over_turn_budget"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Image:
    file_id: str
    file_size: int | None
    mime_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AlbumImages:
    """What the model sees of an album (one photo is an album of one), and what it does not."""

    images: tuple[ImagePart, ...]
    # The first refusal, for the customer when no image is left.
    refusal: PhotoRefusal
    # Images left out: past the turn's total even in their smallest size.
    left_out: int = 0
    # Photos shown in a smaller size than the per-image cap allows, to fit the total.
    reduced: int = 0


DEFAULT_TURN_MAX_BYTES = 10 * 1024 * 1024
"""``IMAGE_TURN_MAX_BYTES``'s default: twice the default per-image cap."""


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
    max_turn_bytes: int = DEFAULT_TURN_MAX_BYTES
    """The images of one turn together at most (``IMAGE_TURN_MAX_BYTES``)."""
    download_timeout_seconds: float = DOWNLOAD_TIMEOUT_SECONDS

    async def look_all(self, bot: Bot, messages: Sequence[Message]) -> AlbumImages:
        """The images of ``messages`` (an album, in order) within the turn's total (counted)."""
        if not self.vision:
            # Said once for the whole album.
            self.metrics.record_media_refusal("photo", PhotoRefusal.VISION_OFF.value)
            return AlbumImages(images=(), refusal=PhotoRefusal.VISION_OFF)
        refusals: list[PhotoRefusal] = []
        candidates: list[list[_Image]] = []
        for message in messages:
            sizes = self._candidates(message)
            if isinstance(sizes, PhotoRefusal):
                refusals.append(sizes)
            else:
                candidates.append(sizes)
        plan = _plan(candidates, self.max_bytes, self.max_turn_bytes)
        images: list[ImagePart] = []
        left_out = sum(1 for chosen in plan if chosen is None)
        reduced = 0
        spent = 0
        reserved = sum(
            _cost(sizes[chosen], self.max_bytes)
            for sizes, chosen in zip(candidates, plan, strict=True)
            if chosen is not None
        )
        for sizes, chosen in zip(candidates, plan, strict=True):
            if chosen is None:
                continue
            image = sizes[chosen]
            reserved -= _cost(image, self.max_bytes)
            # What the planned images after this one leave of the total (sizes may be unknown).
            allowance = min(self.max_bytes, self.max_turn_bytes - spent - reserved)
            content = await self._download(bot, image, allowance)
            if content is PhotoRefusal.TOO_LARGE and allowance < self.max_bytes:
                left_out += 1
            elif isinstance(content, PhotoRefusal):
                refusals.append(content)
            else:
                spent += len(content)
                images.append(_image_part(image, content))
                if chosen < len(sizes) - 1:
                    reduced += 1
        self._count(refusals, left_out=left_out, shown=len(images))
        if left_out and not refusals:
            refusals.append(PhotoRefusal.TOO_LARGE)
        return AlbumImages(
            images=tuple(images),
            refusal=refusals[0] if refusals else PhotoRefusal.UNREADABLE,
            left_out=left_out,
            reduced=reduced,
        )

    def _count(self, refusals: Sequence[PhotoRefusal], *, left_out: int, shown: int) -> None:
        for refusal in refusals:
            self.metrics.record_media_refusal("photo", refusal.value)
        for _ in range(left_out):
            self.metrics.record_media_refusal("photo", PhotoRefusal.OVER_TURN_BUDGET.value)
        self.metrics.images_to_model.inc(shown)

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

    def _candidates(self, message: Message) -> list[_Image] | PhotoRefusal:
        """The sizes of ``message``'s image within the per-image cap, the smallest first
        (an image file: itself, if within it)."""
        if message.photo:
            fitting = [
                size
                for size in message.photo
                if size.file_size is None or size.file_size <= self.max_bytes
            ]
            if not fitting:
                return PhotoRefusal.TOO_LARGE
            fitting.sort(key=lambda size: size.width * size.height)
            return [
                _Image(file_id=size.file_id, file_size=size.file_size, mime_type="image/jpeg")
                for size in fitting
            ]
        document = message.document
        if document is None or (document.mime_type or "") not in IMAGE_TYPES:
            return PhotoRefusal.UNREADABLE
        if document.file_size is not None and document.file_size > self.max_bytes:
            return PhotoRefusal.TOO_LARGE
        return [
            _Image(
                file_id=document.file_id,
                file_size=document.file_size,
                mime_type=document.mime_type or "image/jpeg",
            )
        ]

    def _choose(self, message: Message) -> _Image | PhotoRefusal:
        """The largest photo size within the limit; an image file if within it."""
        candidates = self._candidates(message)
        return candidates if isinstance(candidates, PhotoRefusal) else candidates[-1]

    async def _download(self, bot: Bot, image: _Image, max_bytes: int) -> bytes | PhotoRefusal:
        got = await download(
            bot,
            image.file_id,
            max_bytes=max_bytes,
            timeout_seconds=self.download_timeout_seconds,
            what="Image",
        )
        return PhotoRefusal(got.value) if isinstance(got, DownloadFailure) else got


def _image_part(image: _Image, content: bytes) -> ImagePart:
    encoded = base64.b64encode(content).decode("ascii")
    return ImagePart(file_id=image.file_id, data_url=f"data:{image.mime_type};base64,{encoded}")


def _cost(image: _Image, max_bytes: int) -> int:
    """What ``image`` takes of the total: its reported size, else as much as one may."""
    return image.file_size if image.file_size is not None else max_bytes


def _plan(candidates: Sequence[Sequence[_Image]], max_bytes: int, total: int) -> list[int | None]:
    """Which size each image takes (an index into its sizes, smallest first), ``None``: left out.

    As many images as fit in their smallest size, in order; then each, in order,
    the largest size the rest of the total allows.
    """
    left = total
    plan: list[int | None] = []
    for sizes in candidates:
        cost = _cost(sizes[0], max_bytes)
        if cost <= left:
            plan.append(0)
            left -= cost
        else:
            plan.append(None)
    for index, sizes in enumerate(candidates):
        chosen = plan[index]
        if chosen is None:
            continue
        now = _cost(sizes[chosen], max_bytes)
        for larger in range(len(sizes) - 1, chosen, -1):
            extra = _cost(sizes[larger], max_bytes) - now
            if extra <= left:
                plan[index] = larger
                left -= extra
                break
    return plan
