"""The offer of a person in Telegram: one message with one button, and reading its press back."""

import logging

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from bot import customer_texts
from bot.telegram.sending import ReplyNotDeliveredError, ReplySender

CALLBACK_DATA = "esc:person"
"""The button's data: nothing else is needed (the chat says whose conversation it is)."""

logger = logging.getLogger(__name__)


def is_offer_press(data: str | None) -> bool:
    """Whether a button's data is the offer's (exactly; anything else is not)."""
    return data == CALLBACK_DATA


def keyboard() -> InlineKeyboardMarkup:
    """The offer's one button."""
    button = InlineKeyboardButton(
        text=customer_texts.ESCALATION_BUTTON, callback_data=CALLBACK_DATA
    )
    return InlineKeyboardMarkup(inline_keyboard=[[button]])


async def send_offer(replies: ReplySender, bot: Bot, chat_id: int) -> bool:
    """Send the offer (retried as any reply); ``False`` when Telegram did not take it."""
    try:
        await replies.send_with_buttons(bot, chat_id, customer_texts.ESCALATION_OFFER, keyboard())
    except (ReplyNotDeliveredError, TelegramAPIError) as error:
        logger.warning("Escalation offer not sent: %s", type(error).__name__)
        return False
    return True
