"""The satisfaction question in Telegram: one message with buttons 1 to 5, and its deliverer."""

import logging
from dataclasses import dataclass

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from bot import customer_texts
from bot.csat.callback import FeedbackPress
from bot.language.texts import Texts
from bot.queue.delivery_steps import AskQuestion
from bot.telegram.delivery import DeliveryRun, Outgoing
from bot.telegram.sending import ReplyNotDeliveredError, ReplySender

SCORES = (1, 2, 3, 4, 5)

logger = logging.getLogger(__name__)


def keyboard(question_id: str) -> InlineKeyboardMarkup:
    """One row of five buttons, 1 (worst) to 5 (best)."""
    return InlineKeyboardMarkup(
        inline_keyboard=[
            [
                InlineKeyboardButton(
                    text=str(n),
                    callback_data=FeedbackPress(question_id=question_id, score=n).pack(),
                )
                for n in SCORES
            ]
        ]
    )


async def send_question(
    replies: ReplySender, bot: Bot, chat_id: int, question_id: str, texts: Texts | None = None
) -> bool:
    """Send the question (retried as any reply); ``False`` when Telegram did not take it.

    A 403 marks the chat blocked (the sender does, when it knows the blocked chats).
    """
    try:
        await replies.send_with_buttons(
            bot,
            chat_id,
            customer_texts.shown(texts, customer_texts.CSAT_QUESTION),
            keyboard(question_id),
        )
    except (ReplyNotDeliveredError, TelegramAPIError) as error:
        logger.warning("CSAT question %s not sent: %s", question_id, type(error).__name__)
        return False
    return True


@dataclass(frozen=True, kw_only=True)
class QuestionDeliverer:
    """Delivers :class:`~bot.queue.delivery_steps.AskQuestion`: its ``asked`` entry is
    written only when Telegram took the question (never to a chat that blocked the bot)."""

    out: Outgoing

    async def deliver(self, step: AskQuestion, run: DeliveryRun) -> None:
        """Send the question in its language; on success its audit joins the reply's."""
        reply = run.delivery
        if run.blocked:
            logger.info("CSAT question %s not sent: the customer blocked the bot", reply.turn_id)
            return
        texts = self.out.texts(step.language)
        if await send_question(
            self.out.replies, self.out.bot, reply.chat_id, step.question_id, texts
        ):
            run.audit.extend(step.audit)
