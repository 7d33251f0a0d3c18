"""A press on a suggested reply in a staff topic, run by the worker holding the customer's chat.

Intake queued it in the customer's chat (the press names it), from the staff chat
only; here it is checked again as staff messages are: in the topic mapped to this
customer, by a person who is a current member of the staff chat. Anything else is
dropped silently. The customer never sees a failure of a staff press.

Its part in a worker's jobs (:func:`jobs`): drafting a suggestion and posting a
quality review (notices the intake queued), and a given-up press on a suggestion
(dropped: no customer waits for it).
"""

import logging
from functools import partial

from aiogram import Bot, Router
from aiogram.types import CallbackQuery, Message

from bot.analysis.feature import AnalysisFeature
from bot.chat_errors import ChatServiceError
from bot.handoff.feature import HandoffFeature
from bot.handoff.service import HandoffService
from bot.ops.features import Features
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import relay
from bot.queue.job_results import DropReason, JobContext, JobDone, JobDropped, JobOutcome
from bot.queue.jobs import Notice
from bot.queue.staff_actions import StaffAction
from bot.staff_assist.buttons import SuggestionPress
from bot.staff_assist.feature import StaffAssistFeature
from bot.staff_assist.service import StaffAssist
from bot.staff_texts import SUGGESTION_NOT_SAVED
from bot.storage.keys import telegram_conversation
from bot.telegram.callbacks import Pressed, read_press
from bot.telegram.feature_jobs import FeatureJobs, JobRun, WorkerKit
from bot.telegram.feature_routers import FeatureRouters
from bot.telegram.staff_members import StaffMembership

logger = logging.getLogger(__name__)


async def on_suggestion_press(
    callback: CallbackQuery,
    callback_data: SuggestionPress,
    bot: Bot,
    job: JobContext,
    *,
    handoff: HandoffFeature | None = None,
    assist: StaffAssistFeature | None = None,
    staff_members: StaffMembership,
) -> JobDone | Reply | None:
    """Send the suggestion (or its action's card) if a staff member pressed it in its topic."""
    message = callback.message if isinstance(callback.message, Message) else None
    if handoff is None or assist is None or message is None:
        return None
    if not await _from_staff_in_topic(
        callback, callback_data, message, bot, job, handoff.service, staff_members
    ):
        return None
    try:
        return await assist.assist.press(
            telegram_conversation(job.job.chat_id), job, callback_data, message.message_id
        )
    except ChatServiceError as error:
        logger.warning("Suggestion press not saved: %s", error.kind)
    except Exception:  # staff's press: a failure goes to the topic, never to the customer
        logger.exception("Suggestion press %s failed", job.job.job_id)
    return Reply.of(
        relay(StaffAction(kind="post", text=assist.assist.staff_texts(SUGGESTION_NOT_SAVED)))
    )


async def _from_staff_in_topic(  # noqa: PLR0917 - every part of the press is checked
    callback: CallbackQuery,
    press: SuggestionPress,
    message: Message,
    bot: Bot,
    job: JobContext,
    handoff: HandoffService,
    staff_members: StaffMembership,
) -> bool:
    """A staff member's press, in the topic mapped to this job's customer."""
    user = callback.from_user
    thread = message.message_thread_id
    if message.chat.id != handoff.staff_chat_id or thread is None or user.is_bot:
        return False
    key = telegram_conversation(job.job.chat_id)
    if press.chat_id != job.job.chat_id or await handoff.topics.conversation_of(thread) != key:
        logger.warning("Suggestion press %s is not in this customer's topic", job.job.job_id)
        return False
    return await staff_members.admits(
        bot, handoff.staff_chat_id, user.id, f"Suggestion press {job.job.job_id}"
    )


def build_router() -> Router:
    """A fresh router with the suggestion buttons' handler (their presses only)."""
    router = Router(name=__name__)
    router.callback_query.register(
        partial(on_suggestion_press, staff_members=StaffMembership()), Pressed(SuggestionPress)
    )
    return router


def routers(features: Features) -> FeatureRouters:
    """Staff's presses on suggested replies (queued in the customer's chat), with staff
    assist on."""
    if features.get(StaffAssistFeature) is None:
        return FeatureRouters()
    return FeatureRouters(routers=(build_router(),))


async def draft_suggestion(assist: StaffAssist, run: JobRun) -> JobOutcome:
    """The suggestion's notice: draft a suggested reply for the topic."""
    return await assist.draft(run.conversation_key, run.context)


async def post_review(
    assist: StaffAssist, analysis: AnalysisFeature | None, run: JobRun
) -> JobOutcome:
    """The quality review's notice: post the conversation to staff with its last analysis."""
    stored = await analysis.schedule.latest(run.conversation_key) if analysis else None
    return await assist.review(run.context, stored.analysis.quality if stored is not None else None)


async def given_up_press(run: JobRun) -> JobOutcome | None:
    """Staff's press on a suggestion, given up: dropped (the customer is never told);
    ``None`` for any other job."""
    callback = run.job.update.get("callback_query")
    data = callback.get("data") if isinstance(callback, dict) else None
    if isinstance(read_press(data if isinstance(data, str) else None), SuggestionPress):
        return JobDropped(reason=DropReason.GIVEN_UP_NOTICE)
    return None


def jobs(kit: WorkerKit) -> FeatureJobs:
    """With staff assist on, its notices (off, they are nothing due); on or off, a given-up
    press on a suggestion is dropped."""
    features = kit.app.features
    staff_assist = features.get(StaffAssistFeature)
    if staff_assist is None:
        return FeatureJobs(given_up=(given_up_press,))
    assist = staff_assist.assist
    return FeatureJobs(
        notices={
            Notice.SUGGESTION: partial(draft_suggestion, assist),
            Notice.QUALITY_REVIEW: partial(post_review, assist, features.get(AnalysisFeature)),
        },
        given_up=(given_up_press,),
    )
