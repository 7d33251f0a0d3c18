"""A press on a confirmation card, run by the worker that holds the customer's chat."""

import logging

from aiogram import Router
from aiogram.types import CallbackQuery

from bot import customer_texts
from bot.actions.buttons import ActionPress
from bot.actions.feature import ActionsFeature
from bot.actions.presses import Press
from bot.chat_errors import ChatServiceError
from bot.engine.chat_service import ChatService
from bot.language.texts import Texts
from bot.ops.features import Features
from bot.queue.delivery import Reply
from bot.queue.job_results import JobContext, JobDone
from bot.storage.keys import telegram_conversation
from bot.telegram.callbacks import Pressed, card_press
from bot.telegram.feature_routers import FeatureRouters
from turn import TurnContext

logger = logging.getLogger(__name__)


async def on_press(
    callback: CallbackQuery,
    callback_data: ActionPress,
    job: JobContext,
    *,
    chat_service: ChatService | None = None,
    actions: ActionsFeature | None = None,
    texts: Texts | None = None,
) -> JobDone | Reply | None:
    """Settle the chat's pending action if this press may; else change nothing (``None``).

    ``callback_data`` is the press its router's filter read. Intake answered the
    callback already (the spinner stopped there). The actions part decides; the
    settlement is committed here, with the job's pop.
    """
    press = card_press(callback, callback_data)
    if actions is None or chat_service is None or press is None:
        return None
    key = telegram_conversation(int(press.chat_id))
    try:
        settled = await actions.confirmations.press(
            key, job, press, gettext=customer_texts.gettext_of(texts)
        )
        if settled is None:
            return None
        if settled.tool_result is not None:
            # A confirmed read: the model answers the customer from its result.
            return await chat_service.answer_action(press_context(key, job, press), job, settled)
        return await chat_service.commit_without_turn(key, job, settled.change, settled.reply)
    except ChatServiceError as error:
        # Not saved: the job runs again (the handler's key keeps the shop's change single).
        logger.warning("Press on action %s not saved: %s", press.action_id, error.kind)
        return Reply.say(
            customer_texts.failure_message(error, job.job.turn_id, customer_texts.gettext_of(texts))
        )


def press_context(key: str, job: JobContext, press: Press) -> TurnContext:
    """The turn of a press the model answers: the chat's identity and language, as stored."""
    session = job.session
    return TurnContext(
        conversation_key=key,
        chat_id=press.chat_id,
        user_id=press.presser_id,
        turn_id=job.job.turn_id,
        shop_customer_id=session.shop_customer_id if session is not None else None,
        language=session.language if session is not None else None,
    )


def build_router() -> Router:
    """A fresh router with the confirmation card's button handler (its presses only)."""
    router = Router(name=__name__)
    router.callback_query.register(on_press, Pressed(ActionPress))
    return router


def routers(features: Features) -> FeatureRouters:
    """The confirmation card's button router."""
    return FeatureRouters(routers=(build_router(),))
