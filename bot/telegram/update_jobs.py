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
from dataclasses import dataclass, field

from aiogram import Bot, Dispatcher
from aiogram.dispatcher.event.bases import UNHANDLED
from aiogram.types import Update
from pydantic import ValidationError

from bot import customer_texts
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
from bot.engine.chat_service import ChatService
from bot.language.choice import ConversationLanguages
from bot.language.texts import Texts
from bot.queue.chat_queue import ChatState
from bot.queue.dead_letters import INTERRUPTED, DeadLetter, DeadLetters
from bot.queue.delivery import Delivery, Reply
from bot.queue.delivery_steps import SendText
from bot.queue.job_results import (
    DropReason,
    JobContext,
    JobDone,
    JobDropped,
    JobOutcome,
)
from bot.queue.jobs import Notice, QueuedJob
from bot.queue.worker import HeldLease
from bot.storage.due_set import schedule_together
from bot.telegram.callbacks import read_press
from bot.telegram.delivery import DeliveryRun, Outgoing, StepDeliverers, send_text
from bot.telegram.feature_jobs import JobHooks, JobRun, job_language
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

    ``steps``: the deliverer of each step kind a reply is made of, and ``hooks``: the
    features' notices, their schedules after an answer and after a closed handoff,
    and what settles their given-up jobs (both registered by the assembly from the
    features' Telegram twins: this runner names no feature); ``out``: what a reply
    Redis lost is told through.
    """

    bot: Bot
    dispatcher: Dispatcher
    out: Outgoing
    steps: StepDeliverers
    chat: ChatService
    audit: AuditSink
    dead_letters: DeadLetters
    max_attempts: int
    # The features' notices and hooks (registered by the assembly, from their twins).
    hooks: JobHooks = field(default_factory=JobHooks)
    # The customer's texts per language; None: the source texts (Russian) as they are.
    languages: ConversationLanguages | None = None

    def _job_run(
        self, state: ChatState, lease: HeldLease, job: QueuedJob, context: JobContext
    ) -> JobRun:
        return JobRun(state=state, lease=lease, job=job, context=context, languages=self.languages)

    def _job_texts(self, context: JobContext) -> Texts | None:
        return self.out.texts(job_language(self.languages, context))

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
        A feature may settle its own job instead of the failure's answer (its
        ``given_up`` hooks: a press on a confirmation card, whose action may have run
        before the process died, is settled by the shop's word on the action's key).
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
        if job.notice is not None:
            # The bot's own notice or an idle check: no customer waits for an answer to it.
            return JobDropped(reason=DropReason.GIVEN_UP_NOTICE)
        run = self._job_run(state, lease, job, context)
        for settle in self.hooks.given_up:
            # A feature's own job (a press on a card, staff's press on a suggestion).
            settled = await settle(run)
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

    async def _notice(
        self, state: ChatState, lease: HeldLease, job: QueuedJob, context: JobContext
    ) -> JobOutcome:
        """A job intake decided on: a limit's text, or a feature's notice (the handoff idle
        check, the satisfaction question, ...) run by its feature's handler.

        A feature's notice while the feature is off (no handler) is dropped: nothing due.
        """
        notice = job.notice
        handler = self.hooks.notices.get(notice) if notice is not None else None
        if handler is not None:
            return await handler(self._job_run(state, lease, job, context))
        text = _NOTICES.get(notice) if notice is not None else None
        if text is None:
            return JobDropped(reason=DropReason.NOTHING_DUE)
        return Reply.say(customer_texts.shown(self._job_texts(context), text))

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
        A delivered answer runs the features' schedules (the satisfaction question,
        the analysis); so does a closed handoff.
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
        """After the bot's answer the features' schedules (the question, the analysis after
        the idle time): all in one pipeline, one round trip (never raises)."""
        await schedule_together(self.hooks.due_after_answer(conversation_key))

    async def _schedule_idle(self, conversation_key: str, reply: Delivery) -> None:
        """After a closed handoff the features' hooks (the question and the analysis due now)."""
        closed = self.hooks.after_handoff_closed
        if closed and any(
            fields.get(TYPE) == EntryType.HANDOFF and fields.get("event") == "closed"
            for fields in reply.audit
        ):
            await asyncio.gather(*(hook(conversation_key) for hook in closed))

    async def summarise(self, lease: HeldLease) -> None:
        """Fold old messages into the summary while the worker holds the lease."""
        await self.chat.summarise(lease.conversation_key, token=lease.token)


def _with_delivery(fields: dict[str, str], delivered: bool) -> dict[str, str]:
    """An answered turn's entry says ``undelivered`` when the answer never reached the chat."""
    if delivered:
        return fields
    entry = read_entry(fields)
    if not isinstance(entry, TurnAuditEntry) or entry.outcome != TurnOutcome.ANSWERED:
        return fields
    return with_outcome(fields, TurnOutcome.UNDELIVERED)
