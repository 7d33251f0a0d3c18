"""The offer of a person in Telegram: one message with one button, and reading its press back."""

import logging
from dataclasses import dataclass
from typing import Literal

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.filters.callback_data import CallbackData
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup
from pydantic import ConfigDict

from bot import customer_texts
from bot.language.texts import Texts
from bot.queue.delivery_steps import OfferPerson
from bot.telegram.delivery import DeliveryRun, Outgoing
from bot.telegram.sending import ReplyNotDeliveredError, ReplySender


class OfferPress(CallbackData, prefix="esc"):
    """The offer's button: nothing else is needed (the chat says whose conversation it is).

    Packed as ``esc:person``, the data offers have always carried.
    """

    model_config = ConfigDict(frozen=True)

    # No default: aiogram would unpack an empty value ("esc:") to it.
    whom: Literal["person"]


CALLBACK_DATA = OfferPress(whom="person").pack()
"""The button's data, packed."""

logger = logging.getLogger(__name__)


def keyboard(texts: Texts | None = None) -> InlineKeyboardMarkup:
    """The offer's one button, in ``texts``' language."""
    button = InlineKeyboardButton(
        text=customer_texts.shown(texts, customer_texts.ESCALATION_BUTTON),
        callback_data=CALLBACK_DATA,
    )
    return InlineKeyboardMarkup(inline_keyboard=[[button]])


async def send_offer(
    replies: ReplySender, bot: Bot, chat_id: int, texts: Texts | None = None
) -> bool:
    """Send the offer (retried as any reply) in ``texts``' language; ``False`` when Telegram
    did not take it."""
    text = customer_texts.shown(texts, customer_texts.ESCALATION_OFFER)
    try:
        await replies.send_with_buttons(bot, chat_id, text, keyboard(texts))
    except (ReplyNotDeliveredError, TelegramAPIError) as error:
        logger.warning("Escalation offer not sent: %s", type(error).__name__)
        return False
    return True


@dataclass(frozen=True, kw_only=True)
class OfferDeliverer:
    """Delivers :class:`~bot.queue.delivery_steps.OfferPerson`: its ``escalation_offered``
    entry only if Telegram took the offer (never to a chat that blocked the bot)."""

    out: Outgoing

    async def deliver(self, step: OfferPerson, run: DeliveryRun) -> None:
        """Send the offer in its language; on success its audit joins the reply's."""
        if run.blocked:
            logger.info(
                "Escalation offer %s not sent: the customer blocked the bot", run.delivery.turn_id
            )
            return
        if await send_offer(
            self.out.replies, self.out.bot, run.delivery.chat_id, self.out.texts(step.language)
        ):
            run.audit.extend(step.audit)
