"""A press on a confirmation card, run by the worker that holds the customer's chat."""

import logging

from aiogram import Router
from aiogram.types import CallbackQuery, Message

from bot import customer_texts
from bot.actions.confirmation import ActionConfirmations, Press
from bot.actions.pending import parse_callback
from bot.engine.chat_errors import ChatServiceError
from bot.language.texts import Texts
from bot.queue.job_results import JobContext, JobDone, PlainReply
from bot.storage.keys import telegram_conversation

logger = logging.getLogger(__name__)


async def on_press(
    callback: CallbackQuery,
    job: JobContext,
    actions: ActionConfirmations | None = None,
    texts: Texts | None = None,
) -> JobDone | PlainReply | None:
    """Settle the chat's pending action if this press may; else change nothing (``None``).

    Intake answered the callback already (the spinner stopped there).
    """
    press = card_press(callback)
    if actions is None or press is None:
        return None
    try:
        return await actions.press(
            telegram_conversation(int(press.chat_id)),
            job,
            press,
            gettext=customer_texts.gettext_of(texts),
        )
    except ChatServiceError as error:
        # Not saved: the job runs again (the handler's key keeps the shop's change single).
        logger.warning("Press on action %s not saved: %s", press.action_id, error.kind)
        return PlainReply(
            text=customer_texts.failure_message(
                error, job.job.turn_id, customer_texts.gettext_of(texts)
            )
        )


def card_press(callback: CallbackQuery) -> Press | None:
    """The press on a confirmation card ``callback`` is; ``None`` for anything else."""
    parsed = parse_callback(callback.data)
    card = callback.message if isinstance(callback.message, Message) else None
    if parsed is None or card is None:
        return None
    action_id, choice = parsed
    return Press(
        action_id=action_id,
        choice=choice,
        presser_id=callback.from_user.id,
        chat_id=card.chat.id,
        card_message_id=card.message_id,
    )


def build_router() -> Router:
    """A fresh router with the confirmation card's button handler."""
    router = Router(name=__name__)
    router.callback_query.register(on_press)
    return router
