"""The satisfaction question in Telegram: one message with buttons 1 to 5."""

import contextlib
import logging

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError, TelegramForbiddenError
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup
from redis.exceptions import RedisError

from bot import customer_texts
from bot.csat.callback import callback_data
from bot.telegram.blocked_chats import BlockedChats

SCORES = (1, 2, 3, 4, 5)

logger = logging.getLogger(__name__)


def keyboard(question_id: str) -> InlineKeyboardMarkup:
    """One row of five buttons, 1 (worst) to 5 (best)."""
    return InlineKeyboardMarkup(
        inline_keyboard=[
            [
                InlineKeyboardButton(text=str(n), callback_data=callback_data(question_id, n))
                for n in SCORES
            ]
        ]
    )


async def send_question(
    bot: Bot, chat_id: int, question_id: str, blocked: BlockedChats | None
) -> bool:
    """Send the question; ``False`` when Telegram refused it (a 403 marks the chat blocked)."""
    try:
        await bot.send_message(
            chat_id, customer_texts.CSAT_QUESTION, reply_markup=keyboard(question_id)
        )
    except TelegramForbiddenError:
        logger.info("CSAT question %s not sent: the customer blocked the bot", question_id)
        if blocked is not None:
            with contextlib.suppress(RedisError, OSError):
                await blocked.block(chat_id)
        return False
    except TelegramAPIError as error:
        logger.warning("CSAT question %s not sent: %s", question_id, type(error).__name__)
        return False
    return True
