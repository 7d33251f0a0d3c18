"""What the bot does not read (sticker, location, poll, file, video...): one fitting line.

No model call and never a failed turn: the customer is told in one short line
what the bot cannot take and how to ask instead. A post forwarded from a
channel is answered here too, even with text: its words are the channel's, not
the customer's question.
"""

from aiogram import Router
from aiogram.enums import ContentType
from aiogram.filters import Filter
from aiogram.types import Message

from bot import customer_texts
from bot.handoff.feature import HandoffFeature
from bot.language.texts import Texts
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import SendText, relay
from bot.queue.job_results import JobContext
from bot.queue.staff_actions import StaffAction
from bot.telegram.filters import forwarded_from_channel

_REPLIES: dict[str, str] = {
    ContentType.STICKER: customer_texts.STICKER,
    ContentType.ANIMATION: customer_texts.STICKER,
    ContentType.DICE: customer_texts.STICKER,
    ContentType.LOCATION: customer_texts.LOCATION,
    ContentType.VENUE: customer_texts.LOCATION,
    # Only without account linking: with it, every contact goes to handlers/link.py.
    ContentType.CONTACT: customer_texts.CONTACT,
    ContentType.POLL: customer_texts.POLL,
    ContentType.DOCUMENT: customer_texts.DOCUMENT,
    ContentType.VIDEO: customer_texts.VIDEO,
}


class ForwardedFromChannel(Filter):
    """A post forwarded from a channel; what ``F.forward_origin.type == "channel"`` checks."""

    async def __call__(self, message: Message) -> bool:
        """Whether ``message`` forwards a channel's post."""
        return forwarded_from_channel(message)


def reply_for(message: Message) -> str:
    """The one line that fits what ``message`` carries; the general one for anything else."""
    if forwarded_from_channel(message):
        return customer_texts.FORWARDED_POST
    return _REPLIES.get(message.content_type, customer_texts.NON_TEXT)


async def not_text(
    message: Message,
    job: JobContext,
    handoff: HandoffFeature | None = None,
    texts: Texts | None = None,
) -> Reply:
    """Say what the bot cannot read; while a person is awaited, staff see it too."""
    text = customer_texts.shown(texts, reply_for(message))
    if handoff is not None and handoff.service.state(job) == "waiting":
        copy = StaffAction(kind="copy_to_topic", message_id=message.message_id)
        return Reply.of(SendText(text=text) if text else None, relay(copy))
    return Reply.say(text)


def build_forwarded_router() -> Router:
    """A fresh router for posts forwarded from channels; include it before the text turns."""
    router = Router(name=f"{__name__}.forwarded")
    router.message.register(not_text, ForwardedFromChannel())
    return router


def build_router() -> Router:
    """A fresh router with the catch-all for messages the bot does not read; include it last."""
    router = Router(name=__name__)
    router.message.register(not_text)
    return router
