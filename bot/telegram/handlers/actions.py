"""The confirmation cards' Telegram twin: a press on a card, its delivery, a given-up press.

A press is run by the worker that holds the customer's chat. Its part in a
worker's jobs (:func:`jobs`): the card's deliverer, and the settlement of a press
given up as a dead letter (:class:`GivenUpPresses`).
"""

import logging
from dataclasses import dataclass

from aiogram import Router
from aiogram.types import CallbackQuery, Update
from pydantic import ValidationError

from bot import customer_texts
from bot.actions.buttons import ActionPress
from bot.actions.feature import ActionsFeature
from bot.actions.presses import CardPresses, Press
from bot.chat_errors import ChatServiceError
from bot.engine.chat_service import ChatService
from bot.language.texts import Texts
from bot.ops.features import Features
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import SendCard
from bot.queue.job_results import JobContext, JobDone
from bot.storage.keys import telegram_conversation
from bot.telegram.action_cards import CardDeliverer, CardIndex, CardWithdrawal
from bot.telegram.callbacks import Pressed, card_press, read_press
from bot.telegram.delivery import Outgoing, route
from bot.telegram.feature_jobs import FeatureJobs, JobRun, WorkerKit
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


@dataclass(frozen=True, kw_only=True)
class GivenUpPresses:
    """Settles a press on a confirmation card given up as a dead letter.

    Its action may have run before the process died: the shop is asked by the
    action's key, and the card and the pending action are closed, instead of the
    failure's answer.
    """

    confirmations: CardPresses
    chat: ChatService
    out: Outgoing

    async def settle(self, run: JobRun) -> JobDone | None:
        """Settle a given-up press on the chat's pending action; ``None`` for any other job."""
        job = run.job
        if "callback_query" not in job.update:
            return None
        try:
            update = Update.model_validate(job.update, context={"bot": self.out.bot})
        except ValidationError:
            return None
        callback = update.callback_query
        pressed = read_press(callback.data) if callback is not None else None
        if callback is None or not isinstance(pressed, ActionPress):
            return None
        press = card_press(callback, pressed)
        if press is None:
            return None
        settled = await self.confirmations.press(
            run.conversation_key,
            run.context,
            press,
            given_up=True,
            gettext=customer_texts.gettext_of(self.out.texts(run.language())),
        )
        if settled is None:
            return None
        # A commit that fails raises: the job stays, and the next worker settles it.
        return await self.chat.commit_without_turn(
            run.conversation_key, run.context, settled.change, settled.reply
        )


def jobs(kit: WorkerKit) -> FeatureJobs:
    """The card's deliverer (with its index and the withdrawal of an old card), and the
    settlement of a given-up press."""
    app = kit.app
    cards = CardDeliverer(
        out=kit.out,
        index=CardIndex(app.redis, app.keys, app.settings.session.ttl_seconds),
        withdrawal=CardWithdrawal(sessions=app.sessions),
    )
    actions = app.features.get(ActionsFeature)
    return FeatureJobs(
        steps=(route(SendCard, cards.deliver),),
        given_up=(
            (
                GivenUpPresses(
                    confirmations=actions.confirmations, chat=kit.chat, out=kit.out
                ).settle,
            )
            if actions is not None
            else ()
        ),
    )
