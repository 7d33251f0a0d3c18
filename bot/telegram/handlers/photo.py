"""A photo, or an image file, with its caption: a turn whose message shows the image.

With ``VISION=on`` the image goes to the model as an image part of the
customer's message (this request only; the history keeps a marker and the
file id). Without vision the bot says it cannot look at photos, and offers a
person where a staff group is configured.
"""

from aiogram import Bot, Router
from aiogram.filters import Filter
from aiogram.types import Message

from bot import customer_texts
from bot.accounts.linking import AccountLinking
from bot.handoff.service import HandoffService
from bot.handoff.staff_actions import StaffAction
from bot.ops.surrogates import replace_lone_surrogates
from bot.queue.job_results import JobContext, JobResult, PlainReply
from bot.telegram.drafts import Drafts
from bot.telegram.handlers.chat import run_turn
from bot.telegram.photos import PhotoRefusal, Photos, is_image
from bot.telegram.ports import ChatPort
from turn import TurnInput


class HasImage(Filter):
    """A photo, or a document that is an image."""

    async def __call__(self, message: Message) -> bool:
        """Whether ``message`` carries an image."""
        return is_image(message)


async def photo_message(
    message: Message,
    bot: Bot,
    job: JobContext,
    chat_service: ChatPort,
    *,
    photos: Photos,
    handoff: HandoffService | None = None,
    drafts: Drafts | None = None,
    account_linking: AccountLinking | None = None,
) -> JobResult:
    """Answer the photo with the model's eyes, or say kindly why not."""
    image = await photos.look(bot, message)
    if isinstance(image, PhotoRefusal):
        text = _refusal_text(image, staff=handoff is not None)
        if handoff is not None and handoff.state(job) == "waiting":
            # Staff following a waiting chat see the photo themselves.
            copy = StaffAction(kind="copy_to_topic", message_id=message.message_id)
            return PlainReply(text=text, staff=(copy,))
        return PlainReply(text=text)
    return await run_turn(
        message,
        bot,
        job,
        chat_service,
        handoff,
        text=replace_lone_surrogates(message.caption or ""),
        turn_input=TurnInput(kind="photo", images=(image,)),
        drafts=drafts,
        account_linking=account_linking,
    )


def _refusal_text(refusal: PhotoRefusal, *, staff: bool) -> str:
    if refusal is PhotoRefusal.TOO_LARGE:
        return customer_texts.PHOTO_TOO_LARGE
    if refusal is PhotoRefusal.UNREADABLE:
        return customer_texts.PHOTO_NOT_SEEN
    return customer_texts.PHOTO_OPERATOR if staff else customer_texts.PHOTO


def build_router() -> Router:
    """A fresh router with the photo handler; include it before the catch-all."""
    router = Router(name=__name__)
    router.message.register(photo_message, HasImage())
    return router
