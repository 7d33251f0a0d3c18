"""Handoff handlers: ``/operator`` and ``human`` state for customers; the staff topics.

Staff messages reach a worker through the *customer's* queue (intake maps the
topic to its customer), so they are checked again here: only from the staff
chat, only in the topic mapped to this customer, never from a bot, and only
from a current member of the staff chat (``getChatMember``, kept briefly:
:mod:`bot.telegram.staff_members`). Anything else is dropped silently.
Commands other than our ``/close`` in a topic are neither run nor relayed.

Its part in a worker's jobs (:func:`jobs`): the idle check (a notice the sweeper
queues) and the staff desk, which delivers the relays to the staff topics.
"""

import logging
from collections.abc import Callable
from functools import partial

from aiogram import Bot, Router
from aiogram.filters import Command
from aiogram.types import Message

from bot import customer_texts
from bot.analysis.feature import AnalysisFeature
from bot.chat_errors import ChatServiceError
from bot.handoff.feature import HandoffFeature
from bot.handoff.service import HandoffService
from bot.language.texts import Texts
from bot.ops.features import Features
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import StaffRelay
from bot.queue.job_results import DropReason, JobContext, JobDropped, JobOutcome
from bot.queue.jobs import Notice
from bot.queue.staff_actions import HandoffTurn
from bot.staff_assist.feature import StaffAssistFeature
from bot.storage.keys import telegram_conversation
from bot.telegram.delivery import route
from bot.telegram.feature_jobs import FeatureJobs, JobRun, WorkerKit
from bot.telegram.feature_routers import FeatureRouters
from bot.telegram.filters import RELAYED_CONTENT, CommandLike, InChat, own_command
from bot.telegram.media import Media
from bot.telegram.staff_desk import StaffDesk
from bot.telegram.staff_members import StaffMembership
from bot.telegram.voice import Heard, recording_of

logger = logging.getLogger(__name__)


def customer_of(message: Message) -> HandoffTurn:
    """Who wrote ``message``, as the staff header names them."""
    user = message.from_user
    return HandoffTurn(
        name=user.full_name if user else "",
        username=(user.username or "") if user else "",
        message_id=message.message_id,
    )


async def operator(
    message: Message,
    job: JobContext,
    handoff: HandoffFeature | None = None,
    operator_unavailable: Callable[[Texts | None], str] | None = None,
    texts: Texts | None = None,
) -> JobOutcome:
    """The customer asks for a person (without a staff group: the hours, as the demo model says)."""
    if handoff is None:
        text = (
            operator_unavailable(texts)
            if operator_unavailable
            else customer_texts.shown(texts, customer_texts.OPERATOR_OFF)
        )
        return Reply.say(text)
    if handoff.service.state(job) != "bot":
        return Reply.say(customer_texts.shown(texts, customer_texts.OPERATOR_ALREADY))
    return await handoff.service.open(
        telegram_conversation(message.chat.id),
        job,
        customer_of(message),
        trigger="command",
        text=customer_texts.shown(texts, customer_texts.OPERATOR_WAITING),
        texts=texts,
    )


async def in_human_state(
    message: Message, job: JobContext, handoff: HandoffFeature | None = None
) -> bool:
    """Filter: a person answers this conversation now (the bot stays silent)."""
    return handoff is not None and handoff.service.state(job) == "human"


async def customer_to_staff(
    message: Message,
    bot: Bot,
    job: JobContext,
    handoff: HandoffFeature,
    media: Media | None = None,
) -> JobOutcome:
    """In ``human`` state any customer message (text or media) goes to the topic only.

    A voice message goes with its transcript (when it can be had) for staff to read.
    """
    transcript = None
    # Offline (no transcriber) the voice message simply goes to staff, as before.
    voice = media.voice if media is not None else None
    if voice is not None and voice.transcriber is not None and recording_of(message) is not None:
        heard = await voice.hear(bot, message)
        transcript = heard.text if isinstance(heard, Heard) else None
    return await handoff.service.customer_message(
        telegram_conversation(message.chat.id),
        job,
        message.message_id,
        message.text or message.caption,
        transcript=transcript,
    )


def build_customer_router() -> Router:
    """``/operator``, then the ``human`` state catch-all; include before the other routers."""
    router = Router(name=f"{__name__}.customer")
    router.message.register(operator, CommandLike(), Command("operator"))
    router.message.register(customer_to_staff, in_human_state)
    return router


async def staff_message(
    message: Message,
    bot: Bot,
    job: JobContext,
    handoff: HandoffFeature | None = None,
    *,
    staff_members: StaffMembership,
) -> JobOutcome | None:
    """A message in the staff chat, queued in the customer's chat: relay it, or ``/close``."""
    service = handoff.service if handoff is not None else None
    if service is None or not await _from_staff_in_topic(message, bot, job, service, staff_members):
        return None
    conversation_key = telegram_conversation(job.job.chat_id)
    text = message.text or message.caption
    if text is not None and text.startswith("/"):
        # "/close@otherbot" is another bot's command: neither run nor relayed.
        if own_command(text, (await bot.me()).username) == "/close":
            return await service.close(conversation_key, job, "staff")
        return None
    return await service.staff_message(conversation_key, job, message.message_id, text)


async def _from_staff_in_topic(
    message: Message,
    bot: Bot,
    job: JobContext,
    handoff: HandoffService,
    staff_members: StaffMembership,
) -> bool:
    """A staff member's own message, in the topic mapped to this job's customer."""
    user = message.from_user
    thread = message.message_thread_id
    if message.chat.id != handoff.staff_chat_id or thread is None:
        return False
    if user is None or user.is_bot or not message.is_topic_message:
        return False
    # A service message (topic renamed, pinned...) is not for the customer.
    if message.content_type not in RELAYED_CONTENT or message.sender_chat is not None:
        # sender_chat: posted on behalf of a chat (anonymous admin, linked channel),
        # so there is no member to check.
        return False
    if await handoff.topics.conversation_of(thread) != telegram_conversation(job.job.chat_id):
        logger.warning("Staff message %s is not in this customer's topic; dropped", job.job.job_id)
        return False
    return await staff_members.admits(
        bot, handoff.staff_chat_id, user.id, f"Staff message {job.job.job_id}"
    )


def build_staff_router(staff_chat_id: int) -> Router:
    """Every message of the staff chat ends here (never in the customer routers)."""
    router = Router(name=f"{__name__}.staff")
    router.message.filter(InChat(staff_chat_id))
    # One membership cache per dispatcher (per process): a burst asks Telegram once.
    router.message.register(partial(staff_message, staff_members=StaffMembership()))
    return router


def routers(features: Features) -> FeatureRouters:
    """The handoff's routers: ``/operator`` always (without a staff group it tells the hours);
    the staff chat's messages with the handoff on."""
    handoff = features.get(HandoffFeature)
    return FeatureRouters(
        # Before the customer routers: a staff chat message never reaches them.
        routers=(build_staff_router(handoff.service.staff_chat_id),) if handoff is not None else (),
        customer=(build_customer_router(),),
    )


async def idle_check(handoff: HandoffService, run: JobRun) -> JobOutcome:
    """The idle check's notice: end the handoff if nobody wrote for the idle time."""
    done = None
    try:
        done = await handoff.idle_check(run.conversation_key, run.context)
    except ChatServiceError:
        # Not saved: the handoff stays open; the next sweep queues another check.
        logger.warning("Idle check of update %s not saved", run.job.update_id)
    if done is not None:
        return done
    return JobDropped(reason=DropReason.NOTHING_DUE)


def jobs(kit: WorkerKit) -> FeatureJobs:
    """With the handoff on: the idle check, and the staff desk delivering the relays (after
    the reply's audit); off, nothing (an idle check queued before is nothing due)."""
    app = kit.app
    handoff = app.features.get(HandoffFeature)
    if handoff is None:
        return FeatureJobs()
    staff_assist = app.features.get(StaffAssistFeature)
    assist = staff_assist.assist if staff_assist is not None else None
    desk = StaffDesk(
        bot=kit.out.bot,
        sender=kit.out.replies,
        topics=handoff.service.topics,
        sessions=app.sessions,
        analysis=app.features.get(AnalysisFeature),
        assist=assist,
        staff_texts=assist.staff_texts if assist is not None else None,
    )
    return FeatureJobs(
        steps=(route(StaffRelay, desk.deliver, after_audit=True),),
        notices={Notice.HANDOFF_IDLE: partial(idle_check, handoff.service)},
    )
