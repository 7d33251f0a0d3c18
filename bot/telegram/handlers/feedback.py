"""A press on the satisfaction question, run by the worker that holds the customer's chat."""

import logging

from aiogram import Router
from aiogram.enums import ChatType
from aiogram.types import CallbackQuery, Message
from redis.exceptions import RedisError

from bot import customer_texts
from bot.analysis.schedule import AnalysisSchedule
from bot.audit.feedback import FeedbackAuditEntry
from bot.csat.callback import FeedbackPress
from bot.csat.schedule import CsatSchedule
from bot.language.texts import Texts
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import EditCard
from bot.queue.job_results import JobContext
from bot.storage.keys import telegram_conversation
from bot.telegram.callbacks import Pressed

logger = logging.getLogger(__name__)


async def on_feedback(
    callback: CallbackQuery,
    callback_data: FeedbackPress,
    job: JobContext,
    *,
    feedback: CsatSchedule | None = None,
    analyses: AnalysisSchedule | None = None,
    texts: Texts | None = None,
) -> Reply | None:
    """Record the first press of the open question: thank by editing it, audit the score.

    Only the customer asked may answer: the question goes to private chats only,
    whose id is the customer's user id, so a press by anyone else (a forwarded
    question, a forged update) is not theirs. Any other press changes nothing
    (``None``); intake answered the callback already. ``callback_data`` is the
    press its router's filter read.
    """
    question = callback.message if isinstance(callback.message, Message) else None
    if feedback is None or question is None:
        return None
    if question.chat.type != ChatType.PRIVATE or callback.from_user.id != question.chat.id:
        logger.info("Satisfaction press by someone other than the customer: nothing recorded")
        return None
    result = await feedback.record(
        telegram_conversation(question.chat.id),
        callback_data.question_id,
        callback_data.score,
        job.job.job_id,
    )
    if result.verdict != "recorded":
        return None
    answered = FeedbackAuditEntry(
        chat_id=str(question.chat.id),
        turn_id=job.job.turn_id,
        event="answered",
        answered_by=result.answered_by,
        turns=result.turns,
        score=result.score,
        category=await _category(analyses, telegram_conversation(question.chat.id)),
    )
    return Reply.of(
        EditCard(
            message_id=question.message_id,
            text=customer_texts.shown(texts, customer_texts.CSAT_THANKS),
        ),
        audit=(answered.to_fields(),),
    )


async def _category(analyses: AnalysisSchedule | None, conversation_key: str) -> str:
    """The conversation's analysed category ('' without one): CSAT per category in ``stats``."""
    if analyses is None:
        return ""
    try:
        stored = await analyses.latest(conversation_key)
    except RedisError:
        return ""
    return stored.analysis.category if stored is not None else ""


def build_router() -> Router:
    """A fresh router with the satisfaction question's button handler (its presses only)."""
    router = Router(name=__name__)
    router.callback_query.register(on_feedback, Pressed(FeedbackPress))
    return router
