"""The Telegram part of a worker: run a queued update through the dispatcher, deliver replies.

A job runs through the same aiogram routers as ever (filters, commands,
handlers per feature); handlers return what to say instead of sending it.
:meth:`TelegramJobRunner.run` tells the worker what happened to the job (a
:class:`~bot.queue.job_results.JobOutcome`); the worker finishes it: the reply
is committed to the chat's outbox first and sent afterwards, so a crash
between the two sends it when another worker takes the chat over.
:meth:`TelegramJobRunner.deliver` hands the reply's steps to their deliverers
(:mod:`bot.telegram.delivery`), writes its audit, and schedules what follows.

The one window that can still send a reply twice: Telegram accepted it and
the process died before the outbox entry was removed; the next worker then
sends it again. Everything else (a crash before the commit, during the send,
after the removal) sends it once or re-runs the turn that never committed.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass

from aiogram import Bot, Dispatcher
from aiogram.dispatcher.event.bases import UNHANDLED
from aiogram.types import Update
from pydantic import ValidationError

from bot import customer_texts
from bot.actions.buttons import ActionPress
from bot.actions.presses import CardPresses
from bot.analysis.schedule import AnalysisSchedule
from bot.audit.analysis import ESCALATION_OFFERED, AnalysisAuditEntry
from bot.audit.feedback import FeedbackAuditEntry
from bot.audit.schema import (
    FAILED,
    TYPE,
    EntryType,
    TurnAuditEntry,
    TurnErrorCode,
    read_entry,
    with_outcome,
)
from bot.audit.sink import AuditSink
from bot.chat_errors import ChatServiceError
from bot.csat.schedule import CsatSchedule, claimed_score
from bot.engine.chat_service import ChatService
from bot.handoff.service import HandoffService
from bot.language.choice import ConversationLanguages
from bot.language.texts import Texts
from bot.queue.chat_queue import ChatState
from bot.queue.dead_letters import INTERRUPTED, DeadLetter, DeadLetters
from bot.queue.delivery import Delivery, Reply
from bot.queue.delivery_steps import AskQuestion, OfferPerson, SendText
from bot.queue.job_results import (
    DropReason,
    JobContext,
    JobDone,
    JobDropped,
    JobOutcome,
)
from bot.queue.jobs import Notice, QueuedJob
from bot.queue.worker import HeldLease
from bot.staff_assist.buttons import SuggestionPress
from bot.staff_assist.service import StaffAssist
from bot.storage.due_set import schedule_together
from bot.telegram.callbacks import card_press, read_press
from bot.telegram.delivery import DeliveryRun, Outgoing, StepDeliverers, send_text
from bot.telegram.middlewares.language import stored_language
from turn import TurnOutcome, Usage

logger = logging.getLogger(__name__)

_NOTICES = {
    Notice.RATE_LIMITED: customer_texts.RATE_LIMITED,
    Notice.DAILY_LIMIT: customer_texts.DAILY_LIMIT,
    Notice.QUEUE_FULL: customer_texts.QUEUE_FULL,
    Notice.UNREADABLE: customer_texts.UNREADABLE,
}


@dataclass(frozen=True, kw_only=True)
class TelegramJobRunner:
    """Implements :class:`bot.queue.worker.JobRunner` for Telegram updates.

    ``steps``: the deliverer of each step kind a reply is made of (registered by the
    assembly; this runner knows none of them); ``out``: what a reply Redis lost is
    told through. ``feedback``: the satisfaction question's schedule (``None`` with
    ``CSAT=off``); ``actions`` settles a press given up as a dead letter.
    """

    bot: Bot
    dispatcher: Dispatcher
    out: Outgoing
    steps: StepDeliverers
    chat: ChatService
    audit: AuditSink
    dead_letters: DeadLetters
    max_attempts: int
    handoff: HandoffService | None = None
    feedback: CsatSchedule | None = None
    actions: CardPresses | None = None
    # The idle analysis's schedule (None with ANALYSIS=off): due when the question would be.
    analysis: AnalysisSchedule | None = None
    # The customer's texts per language; None: the source texts (Russian) as they are.
    languages: ConversationLanguages | None = None
    # Staff assist (a staff group is set): drafts suggestions, posts quality reviews.
    assist: StaffAssist | None = None

    def _job_language(self, context: JobContext) -> str | None:
        # The conversation's language as its session keeps it now (None: source texts).
        if self.languages is None:
            return None
        return self.languages.decide(stored_language(context))

    def _job_texts(self, context: JobContext) -> Texts | None:
        return self.out.texts(self._job_language(context))

    async def run(self, state: ChatState, lease: HeldLease) -> JobOutcome:
        """Run the head job; what happened, for the worker to finish it."""
        job = state.head
        if job is None:
            # Unreadable: nothing can be answered; dropped so the chat moves on.
            return JobDropped(reason=DropReason.UNREADABLE)
        context = JobContext(
            job=job,
            job_raw=state.head_raw,
            token=lease.token,
            queue_ms=max(0.0, time.time() * 1000 - job.enqueued_ms),
            session_version=state.session_version,
            session_data=state.session_data,
        )
        if state.attempts > self.max_attempts:
            return await self._give_up(state, lease, job, context)
        if job.notice is not None:
            return await self._notice(state, lease, job, context)
        return await self._feed(state, lease, job, context)

    async def _feed(
        self, state: ChatState, lease: HeldLease, job: QueuedJob, context: JobContext
    ) -> JobOutcome:
        """An update from Telegram: through the dispatcher; what its handler returned."""
        try:
            update = Update.model_validate(job.update, context={"bot": self.bot})
        except ValidationError:
            logger.warning("Queued update %s is not an Update; dropped", job.update_id)
            return JobDropped(reason=DropReason.UNREADABLE)
        callback = update.callback_query
        # A press is read once for the job: every button router matches this value.
        press = read_press(callback.data) if callback is not None else None
        result = await self.dispatcher.feed_update(
            self.bot, update, job=context, button_press=press
        )
        if isinstance(result, JobDone | Reply | JobDropped):
            return result
        if result is not UNHANDLED and result is not None:
            logger.warning("Update %s: a handler returned %s", job.update_id, type(result))
        return JobDropped(reason=DropReason.UNHANDLED)

    async def _give_up(
        self, state: ChatState, lease: HeldLease, job: QueuedJob, context: JobContext
    ) -> JobOutcome:
        """A job whose every attempt ended without an outcome: a dead letter, a kind answer.

        The dead letter first (its own slot, written once), then the chat's step;
        a worker dying in between leaves the job over the limit for the next one.
        A press on a confirmation card is settled instead of answered with the
        failure: its action may have run before the process died, so the shop is
        asked by the action's key, and the card and the pending action are closed.
        """
        failed = state.attempts - 1
        kind = state.failure or INTERRUPTED
        await self.dead_letters.record(
            DeadLetter(
                turn_id=job.turn_id,
                update_id=job.update_id,
                job_id=job.job_id,
                attempts=failed,
                error=kind,
                given_up_ms=int(time.time() * 1000),
                enqueued_ms=job.enqueued_ms,
                # What a retry (support-audit dead-letters retry) queues again.
                job=state.head_raw,
            )
        )
        logger.error(
            "Update %s failed %d times (%s): given up, in the dead letters (incident %s)",
            job.update_id,
            failed,
            kind,
            job.turn_id,
        )
        if job.notice is not None or _suggestion_press(job):
            # The bot's own notice or an idle check, or staff's press on a suggestion:
            # no customer waits for an answer to it.
            return JobDropped(reason=DropReason.GIVEN_UP_NOTICE)
        settled = await self._settle_given_up_press(lease, job, context)
        if settled is not None:
            return settled
        audit = TurnAuditEntry(
            chat_id=str(job.chat_id),
            turn_id=job.turn_id,
            outcome=FAILED,
            error_code=TurnErrorCode.POISON_JOB,
            model="",
            model_steps=None,
            tool_calls=None,
            tool_names=(),
            usage=Usage(),
            latency_ms=None,
            prompt_id="",
            prompt_version="",
            queue_ms=max(0.0, time.time() * 1000 - job.enqueued_ms),
        )
        gettext = customer_texts.gettext_of(self._job_texts(context))
        return Reply.say(
            customer_texts.unexpected_failure_message(job.turn_id, gettext),
            audit=(audit.to_fields(),),
        )

    async def _settle_given_up_press(
        self, lease: HeldLease, job: QueuedJob, context: JobContext
    ) -> JobDone | None:
        """Settle a given-up press on the chat's pending action; ``None`` for any other job."""
        if self.actions is None or "callback_query" not in job.update:
            return None
        try:
            update = Update.model_validate(job.update, context={"bot": self.bot})
        except ValidationError:
            return None
        callback = update.callback_query
        pressed = read_press(callback.data) if callback is not None else None
        if callback is None or not isinstance(pressed, ActionPress):
            return None
        press = card_press(callback, pressed)
        if press is None:
            return None
        settled = await self.actions.press(
            lease.conversation_key,
            context,
            press,
            given_up=True,
            gettext=customer_texts.gettext_of(self._job_texts(context)),
        )
        if settled is None:
            return None
        # A commit that fails raises: the job stays, and the next worker settles it.
        return await self.chat.commit_without_turn(
            lease.conversation_key, context, settled.change, settled.reply
        )

    async def _notice(
        self, state: ChatState, lease: HeldLease, job: QueuedJob, context: JobContext
    ) -> JobOutcome:
        """A job intake decided on: a limit's text, the handoff idle check, the CSAT question,
        the offer of a person."""
        if job.notice is Notice.CSAT:
            return await self._question(state, lease, job, context)
        if job.notice is Notice.ESCALATION:
            return await self._offer(state, lease, job, context)
        if job.notice is Notice.SUGGESTION or job.notice is Notice.QUALITY_REVIEW:
            return await self._assist_job(lease, job, context)
        if job.notice is not Notice.HANDOFF_IDLE:
            notice = _NOTICES[job.notice] if job.notice is not None else ""
            return Reply.say(customer_texts.shown(self._job_texts(context), notice))
        done = None
        if self.handoff is not None:
            try:
                done = await self.handoff.idle_check(lease.conversation_key, context)
            except ChatServiceError:
                # Not saved: the handoff stays open; the next sweep queues another check.
                logger.warning("Idle check of update %s not saved", job.update_id)
        if done is not None:
            return done
        return JobDropped(reason=DropReason.NOTHING_DUE)

    async def _assist_job(
        self, lease: HeldLease, job: QueuedJob, context: JobContext
    ) -> JobOutcome:
        """Staff assist's jobs: draft a suggestion, or post a quality review."""
        if self.assist is None:
            return JobDropped(reason=DropReason.NOTHING_DUE)
        if job.notice is Notice.SUGGESTION:
            return await self.assist.draft(lease.conversation_key, context)
        stored = await self.analysis.latest(lease.conversation_key) if self.analysis else None
        return await self.assist.review(
            context, stored.analysis.quality if stored is not None else None
        )

    async def _question(
        self, state: ChatState, lease: HeldLease, job: QueuedJob, context: JobContext
    ) -> JobOutcome:
        """The satisfaction question, if still due and allowed (else nothing is sent)."""
        key = lease.conversation_key
        claimed = claimed_score(job.update_id)
        question = None
        if self.feedback is not None and claimed is not None:
            question = await self.feedback.decide(
                key,
                claimed_ms=claimed,
                # The job's turn id: a re-run of this job asks the same question.
                question_id=job.turn_id,
                session=context.session,
                blocked=state.blocked,
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
                language=self._job_language(context),
                audit=(asked.to_fields(),),
            )
        )

    async def _offer(
        self, state: ChatState, lease: HeldLease, job: QueuedJob, context: JobContext
    ) -> JobOutcome:
        """The offer of a person, if the conversation is still the bot's (else nothing)."""
        if self.handoff is None or state.blocked or self.handoff.state(context) != "bot":
            return JobDropped(reason=DropReason.NOTHING_DUE)
        offered = AnalysisAuditEntry(
            chat_id=str(job.chat_id), turn_id=job.turn_id, event=ESCALATION_OFFERED
        )
        return Reply.of(
            # Sent later, by the delivery: in the conversation's language as it is now.
            OfferPerson(language=self._job_language(context), audit=(offered.to_fields(),))
        )

    async def tell(self, reply: Delivery) -> None:
        """Send a reply's texts whose job Redis lost, and write its audit: the worker's last
        resort."""
        for step in reply.steps:
            if isinstance(step, SendText):
                await send_text(self.out, reply.chat_id, step, reply.turn_id)
        await self.audit.write_fields(list(reply.audit))

    async def deliver(self, reply: Delivery, lease: HeldLease, *, blocked: bool) -> None:
        """Deliver the reply's steps in order, each by its kind's deliverer; audit it once.

        To a customer who blocked the bot nothing is sent: the reply is undelivered.
        The audit is written once the customer's steps are done (a turn's answer that
        never arrived says so), then the steps that follow it run (the staff relays).
        A delivered answer (re)schedules the satisfaction question and the analysis;
        so does a closed handoff.
        """
        run = DeliveryRun(delivery=reply, lease=lease, blocked=blocked)
        await self.steps.to_customer(run)
        await self._record(
            lease.conversation_key,
            [_with_delivery(fields, run.reached) for fields in (*reply.audit, *run.audit)],
            answered=run.answered,
        )
        await self.steps.after_audit(run)
        if run.reached and not blocked and not run.answered:
            await self._schedule_idle(lease.conversation_key, reply)

    async def _record(
        self, conversation_key: str, audit: list[dict[str, str]], *, answered: bool
    ) -> None:
        """The reply's audit and, after an answer, its schedules.

        Independent writes of other slots, neither ever raises: side by side, one
        round trip's wait for both.
        """
        writes: list[Awaitable[None]] = []
        if audit:
            writes.append(self.audit.write_fields(audit))
        if answered:
            writes.append(self._schedule_answered(conversation_key))
        await asyncio.gather(*writes)

    async def _schedule_answered(self, conversation_key: str) -> None:
        """After the bot's answer the question and the analysis are due after the idle time:
        both schedules in one pipeline, one round trip (never raises)."""
        due = [
            self.feedback.due_after_answer(conversation_key) if self.feedback else None,
            self.analysis.due_after_answer(conversation_key) if self.analysis else None,
        ]
        await schedule_together([entry for entry in due if entry is not None])

    async def _schedule_idle(self, conversation_key: str, reply: Delivery) -> None:
        """After a closed handoff the question and the analysis are due now."""
        idle = [part for part in (self.feedback, self.analysis) if part is not None]
        if idle and any(
            fields.get(TYPE) == EntryType.HANDOFF and fields.get("event") == "closed"
            for fields in reply.audit
        ):
            await asyncio.gather(*(part.handoff_closed(conversation_key) for part in idle))

    async def summarise(self, lease: HeldLease) -> None:
        """Fold old messages into the summary while the worker holds the lease."""
        await self.chat.summarise(lease.conversation_key, token=lease.token)


def _suggestion_press(job: QueuedJob) -> bool:
    """Whether ``job`` is staff's press on a suggested reply (never told the customer)."""
    callback = job.update.get("callback_query")
    data = callback.get("data") if isinstance(callback, dict) else None
    return isinstance(read_press(data if isinstance(data, str) else None), SuggestionPress)


def _with_delivery(fields: dict[str, str], delivered: bool) -> dict[str, str]:
    """An answered turn's entry says ``undelivered`` when the answer never reached the chat."""
    if delivered:
        return fields
    entry = read_entry(fields)
    if not isinstance(entry, TurnAuditEntry) or entry.outcome != TurnOutcome.ANSWERED:
        return fields
    return with_outcome(fields, TurnOutcome.UNDELIVERED)
