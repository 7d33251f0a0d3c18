"""The satisfaction question's Telegram twin: the press on it, and its part in the jobs.

A press on the question is run by the worker that holds the customer's chat;
the question itself is a notice the sweeper queues (:func:`ask_question`), sent
by its deliverer; after an answer or a closed handoff the question is scheduled.
"""

import logging
from functools import partial

from aiogram import Router
from aiogram.enums import ChatType
from aiogram.types import CallbackQuery, Message
from redis.exceptions import RedisError

from bot import customer_texts
from bot.analysis.feature import AnalysisFeature
from bot.audit.feedback import FeedbackAuditEntry
from bot.csat.callback import FeedbackPress
from bot.csat.feature import CsatFeature
from bot.csat.schedule import CsatSchedule, claimed_score
from bot.language.texts import Texts
from bot.ops.features import Features
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import AskQuestion, EditCard
from bot.queue.job_results import DropReason, JobContext, JobDropped, JobOutcome
from bot.queue.jobs import Notice
from bot.storage.keys import telegram_conversation
from bot.telegram.callbacks import Pressed
from bot.telegram.delivery import route
from bot.telegram.feature_jobs import FeatureJobs, JobRun, WorkerKit
from bot.telegram.feature_routers import FeatureRouters
from bot.telegram.feedback_question import QuestionDeliverer

logger = logging.getLogger(__name__)


async def on_feedback(
    callback: CallbackQuery,
    callback_data: FeedbackPress,
    job: JobContext,
    *,
    csat: CsatFeature | None = None,
    analysis: AnalysisFeature | None = None,
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
    if csat is None or question is None:
        return None
    if question.chat.type != ChatType.PRIVATE or callback.from_user.id != question.chat.id:
        logger.info("Satisfaction press by someone other than the customer: nothing recorded")
        return None
    result = await csat.schedule.record(
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
        category=await _category(analysis, telegram_conversation(question.chat.id)),
    )
    return Reply.of(
        EditCard(
            message_id=question.message_id,
            text=customer_texts.shown(texts, customer_texts.CSAT_THANKS),
        ),
        audit=(answered.to_fields(),),
    )


async def _category(analysis: AnalysisFeature | None, conversation_key: str) -> str:
    """The conversation's analysed category ('' without one): CSAT per category in ``stats``."""
    if analysis is None:
        return ""
    try:
        stored = await analysis.schedule.latest(conversation_key)
    except RedisError:
        return ""
    return stored.analysis.category if stored is not None else ""


def build_router() -> Router:
    """A fresh router with the satisfaction question's button handler (its presses only)."""
    router = Router(name=__name__)
    router.callback_query.register(on_feedback, Pressed(FeedbackPress))
    return router


def routers(features: Features) -> FeatureRouters:
    """The question's button router, on or off (off, a press on an old question changes
    nothing)."""
    return FeatureRouters(routers=(build_router(),))


async def ask_question(schedule: CsatSchedule, run: JobRun) -> JobOutcome:
    """The question's notice: the question, if still due and allowed (else nothing is sent)."""
    job = run.job
    claimed = claimed_score(job.update_id)
    question = None
    if claimed is not None:
        question = await schedule.decide(
            run.conversation_key,
            claimed_ms=claimed,
            # The job's turn id: a re-run of this job asks the same question.
            question_id=job.turn_id,
            session=run.context.session,
            blocked=run.state.blocked,
        )
    if question is None:
        return JobDropped(reason=DropReason.NOTHING_DUE)
    asked = FeedbackAuditEntry(
        chat_id=str(job.chat_id),
        turn_id=job.turn_id,
        event="asked",
        answered_by=question.answered_by,
        turns=question.turns,
    )
    # Its ``asked`` entry goes with the step: written only if Telegram takes the question.
    return Reply.of(
        AskQuestion(
            question_id=question.question_id,
            language=run.language(),
            audit=(asked.to_fields(),),
        )
    )


def jobs(kit: WorkerKit) -> FeatureJobs:
    """The question's deliverer, on or off (a question queued before ``CSAT=off`` is sent);
    on, its notice, and its schedule after an answer (after the idle time) and after a
    closed handoff (now)."""
    steps = (route(AskQuestion, QuestionDeliverer(out=kit.out).deliver),)
    csat = kit.app.features.get(CsatFeature)
    if csat is None:
        return FeatureJobs(steps=steps)
    schedule = csat.schedule
    return FeatureJobs(
        steps=steps,
        notices={Notice.CSAT: partial(ask_question, schedule)},
        after_answer=(schedule.due_after_answer,),
        after_handoff_closed=(schedule.handoff_closed,),
    )
