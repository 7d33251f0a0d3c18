"""The last line: an exception no handler dealt with is logged with an incident code.

The customer gets the kind message for the failure (or a generic one), never
the exception's text. A reply that could not be delivered is only logged:
telling the customer would need the same broken channel.
"""

import logging

from aiogram import Bot, Router
from aiogram.exceptions import TelegramAPIError
from aiogram.types import ErrorEvent

from bot.chat_errors import ChatServiceError
from bot.telegram import messages
from bot.telegram.middlewares.ordering import update_chat_id
from bot.telegram.sending import ReplyNotDeliveredError, ReplySender
from turn import new_turn_id

logger = logging.getLogger(__name__)


async def on_error(event: ErrorEvent, bot: Bot, replies: ReplySender) -> None:
    """Log the failure with a code and tell the customer, if there is one to tell."""
    error = event.exception
    update_id = event.update.update_id
    if isinstance(error, ReplyNotDeliveredError):
        logger.error("Reply to update %s not delivered: %s", update_id, error)
        return
    if isinstance(error, ChatServiceError):
        code = error.turn_id or new_turn_id()
        logger.warning("Update %s failed: %s (incident %s)", update_id, error.kind, code)
        text = messages.failure_message(error, code)
    else:
        code = new_turn_id()
        logger.error("Update %s failed unexpectedly (incident %s)", update_id, code, exc_info=error)
        text = messages.unexpected_failure_message(code)
    chat_id = update_chat_id(event.update)
    if chat_id is None:
        return
    try:
        await replies.send_plain(bot, chat_id, text)
    except (ReplyNotDeliveredError, TelegramAPIError) as send_error:
        logger.error("Could not tell chat %s about incident %s: %s", chat_id, code, send_error)


def build_router() -> Router:
    """A fresh router with the last-resort error handler."""
    router = Router(name=__name__)
    router.error.register(on_error)
    return router
