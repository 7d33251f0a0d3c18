"""A press on the offer of a person: the handoff opens as with ``/operator`` (trigger ``analysis``).

The worker holding the customer's chat runs it. Only the customer may press:
offers go to private chats only, whose id is the customer's user id. A press
after the staff group was removed (no handoff configured) is answered as
``/operator`` is then, and the button goes away: left, it would promise a person.
"""

import logging
from collections.abc import Callable

from aiogram import Router
from aiogram.enums import ChatType
from aiogram.types import CallbackQuery, Message

from bot import customer_texts
from bot.handoff.feature import HandoffFeature
from bot.language.texts import Texts
from bot.ops.features import Features
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import EditCard, SendText
from bot.queue.job_results import JobContext, JobOutcome
from bot.queue.staff_actions import HandoffTurn
from bot.storage.keys import telegram_conversation
from bot.telegram.callbacks import Pressed
from bot.telegram.escalation_offer import OfferPress
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
