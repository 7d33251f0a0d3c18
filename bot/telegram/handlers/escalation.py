"""The request analysis's Telegram twin: the offer of a person, and the analysis's schedule.

A press on the offer of a person opens the handoff as with ``/operator`` (trigger
``analysis``). The offer itself is a notice an analysis queued (:func:`offer_person`),
sent by its deliverer; after an answer or a closed handoff the analysis is scheduled.

The worker holding the customer's chat runs it. Only the customer may press:
offers go to private chats only, whose id is the customer's user id. A press
after the staff group was removed (no handoff configured) is answered as
``/operator`` is then, and the button goes away: left, it would promise a person.
"""

import logging
from collections.abc import Callable
from functools import partial

from aiogram import Router
from aiogram.enums import ChatType
from aiogram.types import CallbackQuery, Message

from bot import customer_texts
from bot.analysis.feature import AnalysisFeature
from bot.audit.analysis import ESCALATION_OFFERED, AnalysisAuditEntry
from bot.handoff.feature import HandoffFeature
from bot.handoff.service import HandoffService
from bot.language.texts import Texts
from bot.ops.features import Features
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import EditCard, OfferPerson, SendText
from bot.queue.job_results import DropReason, JobContext, JobDropped, JobOutcome
from bot.queue.jobs import Notice
from bot.queue.staff_actions import HandoffTurn
from bot.storage.keys import telegram_conversation
from bot.telegram.callbacks import Pressed
from bot.telegram.delivery import route
from bot.telegram.escalation_offer import OfferDeliverer, OfferPress
from bot.telegram.feature_jobs import FeatureJobs, JobRun, WorkerKit
from bot.telegram.feature_routers import FeatureRouters

logger = logging.getLogger(__name__)


async def on_offer_press(
    callback: CallbackQuery,
    job: JobContext,
    handoff: HandoffFeature | None = None,
    operator_unavailable: Callable[[Texts | None], str] | None = None,
    texts: Texts | None = None,
) -> JobOutcome | None:
    """Open the handoff and remove the button (its message edited); else change nothing.

    Its router's filter lets the offer's presses only (:class:`OfferPress`) through.
    """
    offer = callback.message if isinstance(callback.message, Message) else None
    if offer is None:
        return None
    if offer.chat.type != ChatType.PRIVATE or callback.from_user.id != offer.chat.id:
        logger.info("Escalation press by someone other than the customer: nothing done")
        return None
    pressed = EditCard(
        message_id=offer.message_id,
        text=customer_texts.shown(texts, customer_texts.ESCALATION_PRESSED),
    )
    if handoff is None:
        # The offer was made while a staff group was configured; nobody to call now.
        text = (
            operator_unavailable(texts)
            if operator_unavailable
            else customer_texts.shown(texts, customer_texts.OPERATOR_OFF)
        )
        return Reply.of(pressed, SendText(text=text) if text else None)
    if handoff.service.state(job) != "bot":
        return Reply.of(
            pressed, SendText(text=customer_texts.shown(texts, customer_texts.OPERATOR_ALREADY))
        )
    user = callback.from_user
    return await handoff.service.open(
        telegram_conversation(offer.chat.id),
        job,
        HandoffTurn(name=user.full_name, username=user.username or "", message_id=offer.message_id),
        trigger="analysis",
        text=customer_texts.shown(texts, customer_texts.OPERATOR_WAITING),
        card_edit=pressed,
        texts=texts,
    )


def build_router() -> Router:
    """A fresh router with the offer's button handler (its presses only)."""
    router = Router(name=__name__)
    router.callback_query.register(on_offer_press, Pressed(OfferPress))
    return router


def routers(features: Features) -> FeatureRouters:
    """The offer's button router (the analysis offers a person), whatever is on: an offer
    made earlier is still answered."""
    return FeatureRouters(routers=(build_router(),))


async def offer_person(handoff: HandoffService, run: JobRun) -> JobOutcome:
    """The offer's notice: the offer of a person, if the conversation is still the bot's
    (else nothing)."""
    if run.state.blocked or handoff.state(run.context) != "bot":
        return JobDropped(reason=DropReason.NOTHING_DUE)
    offered = AnalysisAuditEntry(
        chat_id=str(run.job.chat_id), turn_id=run.job.turn_id, event=ESCALATION_OFFERED
    )
    return Reply.of(
        # Sent later, by the delivery: in the conversation's language as it is now.
        OfferPerson(language=run.language(), audit=(offered.to_fields(),))
    )


def jobs(kit: WorkerKit) -> FeatureJobs:
    """The offer's deliverer whatever is on; the offer's notice with the handoff on (without
    a person to call nobody is offered one); with the analysis on, its schedule after an
    answer (after the idle time) and after a closed handoff (now)."""
    features = kit.app.features
    handoff = features.get(HandoffFeature)
    analysis = features.get(AnalysisFeature)
    schedule = analysis.schedule if analysis is not None else None
    return FeatureJobs(
        steps=(route(OfferPerson, OfferDeliverer(out=kit.out).deliver),),
        notices=(
            {Notice.ESCALATION: partial(offer_person, handoff.service)}
            if handoff is not None
            else {}
        ),
        after_answer=(schedule.due_after_answer,) if schedule is not None else (),
        after_handoff_closed=(schedule.handoff_closed,) if schedule is not None else (),
    )
