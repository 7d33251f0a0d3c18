"""The handoff's decisions for handlers: state of the conversation, and its commits.

Handlers call this during a job (the worker holds the chat's lease); each
step commits the session change, pops the job and stores the outbox entry
(customer text, staff steps, audit) in one script, through the chat
service. Nothing here talks to Telegram: :class:`bot.telegram.staff_desk.StaffDesk`
does, after the commit.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from bot import customer_texts
from bot.audit.assist import AssistAuditEntry, AssistEvent
from bot.audit.schema import HandoffAuditEntry
from bot.customer_texts import Translate
from bot.engine.chat_service import SPEECH_MARK, ChatService
from bot.handoff.topics import TopicDirectory
from bot.handoff.turns import IDLE_TOPIC_NOTE, closed_entry
from bot.language.texts import Texts
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import EditCard, SendText, StaffRelay
from bot.queue.job_results import JobContext, JobDone
from bot.queue.staff_actions import (
    HandoffTurn,
    StaffAction,
    Trigger,
    reason_of,
    staff_label,
    transcript_post,
)
from bot.sessions.handoff_machine import HandoffEvent, IdleRule, step
from bot.sessions.models import ConversationSession, HandoffState
from tools.write_tools import Localize, as_written

logger = logging.getLogger(__name__)

CLOSED_TOPIC_NOTE = "Разговор возвращён боту."
ALREADY_BOT_TOPIC_NOTE = "Разговор и так у бота: /close не нужен."


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffPolicy:
    """The staff chat, and when a handoff starts and ends by itself."""

    staff_chat_id: int
    after_failed_turns: int
    idle: IdleRule


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffService:
    """Opens, relays and closes handoffs for the handlers of a worker's job.

    ``topics`` is the topic mapping (the staff handlers check it too);
    ``closed_note`` what a customer waiting outside support hours is also told (``None``
    within them).
    """

    chat: ChatService
    topics: TopicDirectory
    settings: HandoffPolicy
    closed_note: Callable[[Translate], str | None] = lambda gettext: None
    # The customer's texts in the conversation's language (the catalogs; else as written).
    localize: Localize = as_written
    # Staff assist (STAFF_SUGGESTIONS=on): a suggested reply is drafted after each relay.
    suggest: bool = False

    def waiting_text(self, text: str, texts: Texts | None = None) -> str:
        """``text`` for a customer who now waits for a person, with the hours when closed
        (in ``texts``' language)."""
        note = self.closed_note(customer_texts.gettext_of(texts))
        return f"{text}\n\n{note}" if note else text

    @property
    def staff_chat_id(self) -> int:
        """The staff forum supergroup."""
        return self.settings.staff_chat_id

    @property
    def idle(self) -> IdleRule:
        """The one idle rule (its time and clock), shared with the idle sweeper."""
        return self.settings.idle

    def session(self, job: JobContext) -> ConversationSession | None:
        """The session the worker read with the job (``None`` when new or unreadable)."""
        return job.session

    def state(self, job: JobContext) -> HandoffState:
        """Who answers now; a handoff idle too long counts as ended (the next turn ends it)."""
        return self.settings.idle.state(self.session(job))

    def _ended_idle(self, job: JobContext) -> tuple[dict[str, str], ...]:
        """The ``closed`` (idle) entry of a handoff that went idle unnoticed, if there is one."""
        session = self.session(job)
        if session is None or session.handoff == "bot" or self.state(job) != "bot":
            return ()
        now = self._now()
        return (
            closed_entry(session, str(job.job.chat_id), job.job.turn_id, "idle", now),
            *self._suggestion_ended(job, "unused"),
        )

    async def record_failure(self, conversation_key: str, turn_id: str) -> bool:
        """Remember a failed turn; ``True`` when enough failed in a row to call a person.

        An answered turn's commit ends the run (:class:`bot.sessions.store.JobCompletion`).
        """
        streak = await self.topics.record_failure(conversation_key, turn_id)
        return streak >= self.settings.after_failed_turns

    async def open(
        self,
        conversation_key: str,
        job: JobContext,
        customer: HandoffTurn,
        *,
        trigger: Trigger,
        text: str,
        reason: str = "",
        audit: tuple[dict[str, str], ...] = (),
        card_edit: EditCard | None = None,
        texts: Texts | None = None,
    ) -> JobDone:
        """Put the conversation in ``waiting``, tell the customer ``text``, open the topic.

        Outside support hours the customer is also told when a person answers.
        ``card_edit``: the bot's message whose button opened it, rewritten without it.
        """
        turn_id = job.job.turn_id
        text = self.waiting_text(text, texts)
        event = (
            HandoffEvent.TURNS_FAILED if trigger == "failed_turns" else HandoffEvent.CUSTOMER_ASKS
        )
        target = step(self.state(job), event).target
        now = self._now()
        why = reason_of(trigger, reason)
        entry = Reply.of(
            card_edit,
            SendText(text=text),
            StaffRelay(
                actions=(
                    StaffAction(
                        kind="open",
                        name=customer.name,
                        username=customer.username,
                        text=staff_label(trigger, reason),
                        handoff_reason=why,
                    ),
                )
            ),
            audit=(
                *audit,
                *self._ended_idle(job),
                HandoffAuditEntry(
                    chat_id=str(job.job.chat_id),
                    turn_id=turn_id,
                    event="opened",
                    trigger=trigger,
                    reason=reason,
                    handoff_reason=why,
                ).to_fields(),
            ),
        )
        return await self.chat.commit_without_turn(
            conversation_key,
            job,
            # From "bot" first: an idle handoff's times must not carry over.
            lambda session: session.with_handoff("bot", now).with_handoff(target, now),
            entry,
        )

    async def customer_message(
        self,
        conversation_key: str,
        job: JobContext,
        message_id: int,
        text: str | None,
        *,
        transcript: str | None = None,
    ) -> JobDone:
        """In ``human`` state: keep the message in the history, copy it to the topic.

        A voice message's ``transcript`` goes to the topic after its copy, and into
        the history (marked as recognised speech) instead of its missing text.
        """
        step(self.state(job), HandoffEvent.CUSTOMER_WRITES)
        staff: tuple[StaffAction, ...] = (StaffAction(kind="copy_to_topic", message_id=message_id),)
        if transcript:
            staff += (transcript_post(transcript),)
        if self.suggest:
            # After the relay, as its own job: drafting never holds the copy up.
            staff += (StaffAction(kind="suggest"),)
        entry = Reply.of(
            StaffRelay(actions=staff),
            # A suggestion still unsent answers an older message: the newer one replaces it.
            audit=self._suggestion_ended(job, "replaced"),
        )
        if transcript:
            content = f"{SPEECH_MARK}{transcript}"
        else:
            content = text if text else "[Клиент отправил вложение без текста.]"
        return await self.chat.commit_without_turn(
            conversation_key,
            job,
            lambda session: session.with_message(
                "user", content, self._now(), job.job.turn_id
            ).with_suggestion(None),
            entry,
        )

    async def staff_message(
        self, conversation_key: str, job: JobContext, message_id: int, text: str | None
    ) -> JobDone:
        """A staff message in the customer's topic: ``human`` state, copied to the customer.

        An open suggestion ends here: staff wrote their own answer.
        """
        content = text if text else "[Сотрудник отправил вложение без текста.]"
        return await self._staff_answer(
            conversation_key,
            job,
            content,
            send=None,
            staff=(StaffAction(kind="copy_to_customer", message_id=message_id),),
            # A handoff that went idle unnoticed ended its suggestion already ("unused").
            audit=self._suggestion_ended(job, "own") if self.state(job) != "bot" else (),
        )

    async def staff_text(
        self,
        conversation_key: str,
        job: JobContext,
        text: str,
        *,
        staff: tuple[StaffAction, ...] = (),
        audit: tuple[dict[str, str], ...] = (),
    ) -> JobDone:
        """Staff's answer the application sends for them (a suggestion sent as is).

        The customer gets ``text`` as a plain message, as a copied staff message reads;
        the session and the audit record it as staff's answer; the suggestion ends.
        """
        return await self._staff_answer(
            conversation_key, job, text, send=text, staff=staff, audit=audit
        )

    async def _staff_answer(
        self,
        conversation_key: str,
        job: JobContext,
        content: str,
        *,
        send: str | None,
        staff: tuple[StaffAction, ...],
        audit: tuple[dict[str, str], ...],
    ) -> JobDone:
        before = self.session(job)
        state = self.state(job)
        target = step(state, HandoffEvent.STAFF_WRITES).target
        now = self._now()
        chat = str(job.job.chat_id)
        turn_id = job.job.turn_id
        steps = list(self._ended_idle(job))
        if state == "bot":
            steps.append(
                HandoffAuditEntry(
                    chat_id=chat,
                    turn_id=turn_id,
                    event="opened",
                    trigger="staff",
                    handoff_reason=reason_of("staff"),
                ).to_fields()
            )
        if state == "bot" or before is None or before.staff_replied_at is None:
            since = before.handoff_since if before is not None and state != "bot" else None
            steps.append(
                HandoffAuditEntry(
                    chat_id=chat,
                    turn_id=turn_id,
                    event="first_reply",
                    wait_ms=(now - since).total_seconds() * 1000 if since is not None else 0.0,
                ).to_fields()
            )
        entry = Reply.of(
            SendText(text=send) if send is not None else None,
            StaffRelay(actions=staff) if staff else None,
            audit=(*steps, *audit),
        )

        def change(session: ConversationSession) -> ConversationSession:
            base = session if state != "bot" else session.with_handoff("bot", now)
            return (
                base.with_handoff(target, now)
                .with_message("staff", content, now, turn_id)
                .with_suggestion(None)
            )

        return await self.chat.commit_without_turn(conversation_key, job, change, entry)

    def _suggestion_ended(self, job: JobContext, event: AssistEvent) -> tuple[dict[str, str], ...]:
        """The audit of the open suggestion ending by ``event`` (none open: nothing)."""
        session = self.session(job)
        suggestion = session.suggestion if session is not None else None
        if suggestion is None:
            return ()
        return (
            AssistAuditEntry(
                chat_id=str(job.job.chat_id),
                turn_id=job.job.turn_id,
                event=event,
                suggestion_id=suggestion.suggestion_id,
            ).to_fields(),
        )

    async def idle_check(self, conversation_key: str, job: JobContext) -> JobDone | None:
        """The sweeper's check: end the handoff if it is still idle (``None``: nothing to do)."""
        session = self.session(job)
        if session is None or session.handoff == "bot":
            # Ended meanwhile (``/new``, or a turn noticed the idle first).
            await self.topics.ended(conversation_key)
            return None
        if not self.settings.idle.is_idle(session):
            return None
        return await self.close(conversation_key, job, "idle")

    async def close(
        self, conversation_key: str, job: JobContext, closed_by: Literal["staff", "idle"]
    ) -> JobDone:
        """Back to ``bot``: a short note to the customer and to the topic."""
        before = self.session(job)
        now = self._now()
        open_now = before is not None and before.handoff != "bot"
        event = HandoffEvent.STAFF_CLOSES if closed_by == "staff" else HandoffEvent.GOES_IDLE
        target = step(before.handoff if before is not None else "bot", event).target
        entry = Reply.of(
            SendText(text=self.localize(before.language, customer_texts.HANDOFF_IDLE_NOTE))
            if before is not None and open_now
            else None,
            StaffRelay(
                actions=(
                    StaffAction(kind="post", text=_topic_note(open_now, closed_by)),
                    StaffAction(kind="ended"),
                )
            ),
            audit=(
                closed_entry(before, str(job.job.chat_id), job.job.turn_id, closed_by, now),
                *self._suggestion_ended(job, "unused"),
            )
            if before is not None and open_now
            else (),
        )
        return await self.chat.commit_without_turn(
            conversation_key,
            job,
            lambda session: session.with_handoff(target, now).with_suggestion(None),
            entry,
        )

    def _now(self) -> datetime:
        return self.settings.idle.now()


def _topic_note(open_now: bool, closed_by: Literal["staff", "idle"]) -> str:
    if not open_now:
        return ALREADY_BOT_TOPIC_NOTE
    return CLOSED_TOPIC_NOTE if closed_by == "staff" else IDLE_TOPIC_NOTE
