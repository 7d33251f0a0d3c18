"""A press on a confirmation card, run by the worker that holds the customer's chat."""

import logging

from aiogram import Router
from aiogram.types import CallbackQuery, Message

from bot import customer_texts
from bot.actions.confirmation import ActionConfirmations, Press
from bot.actions.pending import parse_callback
from bot.engine.chat_errors import ChatServiceError
from bot.queue.job_results import JobContext, JobDone, PlainReply
from bot.storage.keys import telegram_conversation
from bot.telegram.ports import ChatPort

logger = logging.getLogger(__name__)


async def on_press(
    callback: CallbackQuery,
    job: JobContext,
    chat_service: ChatPort,
    actions: ActionConfirmations | None = None,
) -> JobDone | PlainReply | None:
    """Settle the chat's pending action if this press may; else change nothing (``None``).

    Intake answered the callback already (the spinner stopped there). The actions
    part decides; the settlement is committed here, with the job's pop.
    """
    press = card_press(callback)
    if actions is None or press is None:
        return None
    key = telegram_conversation(int(press.chat_id))
    try:
        settled = await actions.press(key, job, press)
        if settled is None:
            return None
        return await chat_service.commit_without_turn(key, job, settled.change, settled.entry)
    except ChatServiceError as error:
        # Not saved: the job runs again (the handler's key keeps the shop's change single).
        logger.warning("Press on action %s not saved: %s", press.action_id, error.kind)
        return PlainReply(text=customer_texts.failure_message(error, job.job.turn_id))


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
