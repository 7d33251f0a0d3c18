"""Anything that is not text (photo, sticker, voice, document, location...): no model call."""

from aiogram import Router
from aiogram.types import Message

from bot.telegram import messages
from bot.telegram.job_results import PlainReply


async def not_text(message: Message) -> PlainReply:
    """Say that only text is understood."""
    return PlainReply(text=messages.NON_TEXT)


def build_router() -> Router:
    """A fresh router with the catch-all for non-text messages; include it last."""
    router = Router(name=__name__)
    router.message.register(not_text)
    return router
