"""Anything that is not text (photo, sticker, voice, document, location...): no model call."""

from aiogram import Router
from aiogram.types import Message

from bot import customer_texts
from bot.handoff.service import HandoffService
from bot.handoff.staff_actions import StaffAction
from bot.queue.job_results import JobContext, PlainReply


async def not_text(
    message: Message, job: JobContext, handoff: HandoffService | None = None
) -> PlainReply:
    """Say that only text is understood; while a person is awaited, staff see it too."""
    if handoff is not None and handoff.state(job) == "waiting":
        copy = StaffAction(kind="copy_to_topic", message_id=message.message_id)
        return PlainReply(text=customer_texts.NON_TEXT, staff=(copy,))
    return PlainReply(text=customer_texts.NON_TEXT)


def build_router() -> Router:
    """A fresh router with the catch-all for non-text messages; include it last."""
    router = Router(name=__name__)
    router.message.register(not_text)
    return router
