"""One customer turn: session, history window, tool loop, save, audit, summary."""

import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from time import perf_counter

from bot.audit.recorder import TurnAuditRecorder
from bot.audit.schema import AuditEntry
from bot.chat_errors import (
    ChatBusyError,
    ChatServiceError,
    ChatStorageError,
    EmptyMessageError,
    MessageTooLongError,
    chat_error_for,
)
from bot.engine.history import HistoryWindow, PreparedContext
from bot.engine.keyed_locks import KeyedLocks
from bot.engine.reply_stream import ReplyStream
from bot.engine.summary import ConversationSummaryService, SummaryError
from bot.engine.summary_tasks import BackgroundSummaries
from bot.engine.tool_loop import BoundedToolLoop, ToolLoopResult
from bot.engine.turn_items import (
    ActionProposed,
    FollowUp,
    HandoffAsked,
    TurnEnd,
    TurnFollower,
)
from bot.llm.types import EncodedPart, Message
from bot.ops.log_context import chat_label
from bot.ops.surrogates import replace_lone_surrogates
from bot.queue.delivery import Delivery, Reply
from bot.queue.delivery_steps import SendCard, SendText, StaffRelay
from bot.queue.job_results import JobContext, JobDone, SessionChange
from bot.queue.jobs import QueuedJob
from bot.queue.staff_actions import HandoffTurn, StaffAction
from bot.sessions.models import ConversationSession
from bot.sessions.pending import ActionCard, expired_note, is_expired, pending_note
from bot.sessions.store import (
    JobCompletion,
    LockedSession,
    SessionLockTimeoutError,
    SessionStore,
    SessionStoreError,
)
from prompts.template import PromptTemplate
from tools.execution import ToolTechnicalError
from tools.knowledge.citations import CitationCheck
from turn import TEXT_INPUT, ToolLoopError, TurnContext, TurnInput, TurnOutcome, Usage

logger = logging.getLogger(__name__)

SPEECH_MARK = "[Голосовое сообщение, распознано автоматически; возможны ошибки распознавания] "
"""Before a transcribed voice message, in the history: the model reads it as speech that
may have been misheard (a product name, a number), and asks again where it matters."""
PHOTO_MARK = "[Покупатель прислал фото]"
"""Before a photo's caption, in the history: later turns know a photo was sent (the model
sees the image itself only in the turn it came with)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatReply:
    """The answer of one turn and what it took (what the front ends show or log).

    ``history_messages`` counts the stored history after this turn and
    ``context_history_messages`` how many of them the model saw.
    ``summary_updated`` says a summary update was started for messages that
    left the window (it runs after the reply); ``has_summary`` that the
    session carries one. ``usage`` is summed over the turn's model calls.
    ``delivery`` is the reply the turn committed (to be delivered).
    """

    text: str
    turn_id: str
    session_id: str
    history_messages: int
    context_history_messages: int
    model: str
    elapsed_seconds: float
    usage: Usage
    response_ids: tuple[str, ...]
    model_steps: int
    tool_names: tuple[str, ...]
    summary_updated: bool
    has_summary: bool
    delivery: Delivery
    # The confirmation card of a write the model proposed, shown after the answer.
    card: ActionCard | None = None

    @property
    def tool_calls_count(self) -> int:
        """How many tool executions the turn made (the seed design's field)."""
        return len(self.tool_names)


@dataclass(frozen=True, slots=True)
class ChatLimits:
    """How long a turn may hold its conversation, and how long another may wait."""

    lease_seconds: float
    wait_seconds: float
    max_message_chars: int = 4000
    # How long a proposal waits for its button (ACTION_CONFIRM_SECONDS); None: no limit.
    card_window_seconds: float | None = None


"""Told to the customer when a handoff ends (staff ``/close`` or idle)."""


@dataclass(kw_only=True, eq=False)
class ChatService:
    """Runs customer turns; the only thing front ends (Telegram, console) talk to.

    Turns of one conversation are serialised twice: in this process, in arrival
    order (:class:`KeyedLocks`); across processes, by the store's lease and its
    version check. A failed turn writes nothing into the history. Messages that
    leave the history window are folded into the summary *after* the reply, in
    a background task, so the customer never waits for it. ``prompt`` is the
    active support chat prompt.
    """

    store: SessionStore
    loop: BoundedToolLoop
    window: HistoryWindow
    summaries: ConversationSummaryService
    prompt: PromptTemplate
    limits: ChatLimits
    model_name: str
    # The parts that own a turn's outcomes (action cards, the handoff policy), in order:
    # each adds what follows to the commit (bot.engine.turn_items).
    followers: tuple[TurnFollower, ...] = ()
    # Takes invented help-center links out of answers; None: no help center to check.
    citations: CitationCheck | None = None
    # The enabled languages (LANGUAGES) by code, each named in the prompt's own language;
    # a prompt with ``${language}`` is rendered once per language, the default's for others.
    languages: Mapping[str, str] = field(default_factory=lambda: {"ru": "русский"})
    default_language: str = "ru"
    _instruction: str = field(init=False)
    _instructions: dict[str, str] = field(init=False, default_factory=dict)
    _locks: KeyedLocks = field(init=False, default_factory=KeyedLocks)
    _summaries_in_background: BackgroundSummaries = field(init=False)
    # Tokens of held leases a turn's commit already handed back (see ``hold``).
    _released: set[str] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        # Rendered once, here: a prompt that cannot render fails at start, not in a turn.
        if "language" in self.prompt.required_variables:
            self._instructions = {
                code: self.prompt.render(language=name) for code, name in self.languages.items()
            }
            self._instruction = self._instructions[self.default_language]
        else:
            self._instruction = self.prompt.render()
        self._summaries_in_background = BackgroundSummaries(self._summarise_unheld)

    def instruction(self, language: str | None) -> str:
        """The system prompt a turn in ``language`` sends (the default language's otherwise)."""
        return self._instructions.get(language or "", self._instruction)

    async def reply(
        self,
        context: TurnContext,
        text: str,
        *,
        held: JobContext,
        customer: HandoffTurn | None = None,
        stream: ReplyStream | None = None,
        turn_input: TurnInput = TEXT_INPUT,
    ) -> ChatReply:
        """Answer one message; raises a :class:`ChatServiceError` subtype on failure.

        ``held`` is the job the front end holds the conversation's lease for (a
        worker's queued job, or :meth:`hold`'s). The reply is committed with its
        outbox entry; the turn's audit goes with it (``ChatReply.delivery``), or
        onto the raised error (``audit_fields``), for the front end to write once
        it has told the customer. ``customer`` (Telegram with handoff on) lets the
        turn open or relay a handoff. ``stream`` (drafts, the console) sees the
        answer as it is written; only the committed reply counts. ``turn_input``
        says what the customer sent: a voice message's ``text`` is its transcript,
        kept in the history after :data:`SPEECH_MARK`; the audit gets the kind.
        """
        started = perf_counter()
        recorder = TurnAuditRecorder(
            chat_id=str(context.chat_id),
            turn_id=context.turn_id,
            model=self.model_name,
            queue_ms=held.queue_ms,
            turn_input=turn_input,
            language=context.language or "",
        )
        try:
            question = self._question(text, turn_input, context.turn_id)
            return await self._reply(
                question,
                context,
                recorder,
                started,
                held,
                customer=customer,
                stream=stream,
                turn_input=turn_input,
            )
        except ChatServiceError as error:
            failure = error
        except ToolLoopError as error:
            failure = chat_error_for(error.kind, str(error), context.turn_id)
            # Our own messages carry no customer text; a crashed tool's trace is a bug to see.
            logger.warning(
                "Turn %s failed (%s): %s",
                context.turn_id,
                failure.kind,
                error,
                exc_info=isinstance(error.__cause__, ToolTechnicalError),
            )
            failure.__cause__ = error
        except SessionStoreError as error:
            failure = _translate_store_error(error, context.turn_id)
            failure.__cause__ = error
        except Exception as error:
            # A bug: the customer is still answered, with the incident code.
            logger.exception("Turn %s failed unexpectedly", context.turn_id)
            failure = ChatServiceError("the turn failed unexpectedly", context.turn_id)
            failure.__cause__ = error
        failure.audit_fields = tuple(
            entry.to_fields() for entry in self._audit_entries(recorder, failure.kind, started)
        )
        raise failure

    async def _reply(
        self,
        question: str,
        context: TurnContext,
        recorder: TurnAuditRecorder,
        started: float,
        held: JobContext,
        *,
        customer: HandoffTurn | None,
        stream: ReplyStream | None,
        turn_input: TurnInput = TEXT_INPUT,
    ) -> ChatReply:
        job = held.job
        locked = await self._held(context.conversation_key, held)
        prepared, result, updated = await self._run(
            locked, question, context, recorder, stream, turn_input=turn_input
        )
        end = _turn_end(
            locked.session,
            result,
            context=context,
            question=question,
            turn_input=turn_input,
            customer=customer,
        )
        follow = FollowUp(session=updated)
        for follower in self.followers:
            follow = follower(end, follow)
        updated = follow.session
        note = follow.note
        answer = SendText(text=f"{note}\n\n{result.text}" if note else result.text, answer=True)
        entry = Delivery.of(
            job,
            Reply.of(
                answer,
                *follow.steps,
                audit=tuple(
                    item.to_fields()
                    for item in self._audit_entries(recorder, TurnOutcome.ANSWERED, started)
                )
                + follow.audit,
            ),
            turn_id=context.turn_id,
        )
        shown = entry.first(SendCard)
        completion = JobCompletion(
            job_raw=held.job_raw,
            job_id=job.job_id,
            # Kept only with a queued job's pop: the console's commit has none to keep.
            outbox_entry=entry.stored() if held.job_raw else "",
            # Only handoff records failed turns: without it there is no streak to end.
            answered=follow.ends_failed_streak,
        )
        await self.store.commit(
            locked, updated, completion=completion, release=held.release_on_commit
        )
        if held.release_on_commit:
            self._released.add(held.token)
        return ChatReply(
            text=result.text,
            turn_id=context.turn_id,
            session_id=updated.session_id,
            history_messages=len(updated.messages),
            context_history_messages=prepared.context_history_messages,
            model=result.model,
            elapsed_seconds=perf_counter() - started,
            usage=result.usage,
            response_ids=result.response_ids,
            model_steps=result.model_steps,
            tool_names=result.tool_names,
            # The front end summarises after delivery (a worker under its lease).
            summary_updated=self.window.overflows(updated.messages),
            has_summary=updated.summary is not None,
            delivery=entry,
            card=shown.card if shown is not None else None,
        )

    @contextlib.asynccontextmanager
    async def hold(
        self, conversation_key: str, context: TurnContext | None = None
    ) -> AsyncIterator[JobContext]:
        """The conversation's lease for a front end without a queue (the console, tests).

        Yields the job a worker would hold, with no queued job behind it (its
        commit pops nothing and keeps no outbox entry: the front end delivers the
        reply it gets). Turns of one conversation take it in arrival order here,
        and across processes by the lease; it is released on leaving. When it
        cannot be taken, the :class:`ChatServiceError` carries the audit of the
        turn of ``context`` (``audit_fields``), as a failed turn's does.
        """
        started = perf_counter()
        turn_id = context.turn_id if context is not None else ""
        async with self._locks.hold(conversation_key):
            try:
                locked = await self.store.acquire(
                    conversation_key,
                    lease_seconds=self.limits.lease_seconds,
                    wait_seconds=self.limits.wait_seconds,
                )
            except SessionStoreError as error:
                failure = _translate_store_error(error, turn_id)
                if context is not None:
                    recorder = TurnAuditRecorder(
                        chat_id=str(context.chat_id), turn_id=turn_id, model=self.model_name
                    )
                    failure.audit_fields = tuple(
                        entry.to_fields()
                        for entry in self._audit_entries(recorder, failure.kind, started)
                    )
                raise failure from error
            try:
                yield JobContext(
                    job=QueuedJob(
                        job_id="",
                        update_id=0,
                        turn_id=turn_id,
                        enqueued_ms=int(time.time() * 1000),
                        chat_id=0,
                    ),
                    job_raw="",
                    token=locked.token,
                    queue_ms=None,
                    session_version=locked.version,
                    # As read with the lease, and its reading: not encoded and read again.
                    session_data=locked.data
                    or (locked.session.model_dump_json() if locked.session else ""),
                    release_on_commit=True,
                    parsed=locked.session,
                )
            finally:
                # A committed turn released the lease in its commit: one script less.
                if locked.token in self._released:
                    self._released.discard(locked.token)
                else:
                    await self._release_quietly(locked)

    async def _run(
        self,
        locked: LockedSession,
        question: str,
        context: TurnContext,
        recorder: TurnAuditRecorder,
        stream: ReplyStream | None = None,
        *,
        turn_input: TurnInput = TEXT_INPUT,
    ) -> tuple[PreparedContext, ToolLoopResult, ConversationSession]:
        session = self._session_or_new(locked)
        instruction = self.instruction(context.language)
        prepared = self.window.prepare(instruction, session.summary, session.messages, question)
        messages = prepared.messages
        if turn_input.images:
            # The images go to the model in this request only; the history keeps the marker.
            messages = (*messages[:-1], _with_images(messages[-1], turn_input))
        pending = session.pending_action
        if pending is not None:
            # The customer's «да» executes nothing: the model is told a button waits,
            # or, once its time ran out, that the card no longer does anything.
            card_window_seconds = self.limits.card_window_seconds
            lapsed = card_window_seconds is not None and is_expired(
                pending, _now(), card_window_seconds
            )
            note = expired_note(pending) if lapsed else pending_note(pending)
            messages = (*messages[:-1], note, messages[-1])
        result = await self.loop.run(messages, context, observer=recorder, stream=stream)
        if self.citations is not None:
            checked = self.citations(result.text)
            if checked.removed:
                # Neither the customer nor the history gets a link to a page that does not exist.
                logger.warning(
                    "Turn %s: %d invented help-center link(s) taken out of the answer",
                    context.turn_id,
                    checked.removed,
                )
                result = dataclasses.replace(result, text=checked.text)
        updated = session.with_turn(
            question,
            result.text,
            _now(),
            self.prompt.version,
            turn_id=context.turn_id,
            photos=tuple(image.file_id for image in turn_input.images),
        )
        if context.language is not None and context.language != session.language:
            # Written with this turn's commit: no round trip of its own.
            updated = updated.with_language(context.language)
        if result.proposal is not None:
            # At most one pending action per chat: a new proposal replaces the old one.
            updated = updated.with_pending_action(result.proposal)
        return prepared, result, updated

    async def _held(self, conversation_key: str, held: JobContext) -> LockedSession:
        """The session the job's lease read, held (its parse shared with the job)."""
        return await self.store.held(
            conversation_key,
            held.token,
            held.session_version,
            held.session_data,
            parsed=held.session,
        )

    def _session_or_new(self, locked: LockedSession) -> ConversationSession:
        """The held session, or a new one for a conversation that has none yet."""
        return locked.session or ConversationSession.start(
            locked.conversation_key, _now(), self.prompt.prompt_id, self.prompt.version
        )

    async def commit_without_turn(
        self,
        conversation_key: str,
        held: JobContext,
        change: Callable[[ConversationSession], ConversationSession],
        reply: Reply,
    ) -> JobDone:
        """Change the session outside a model turn (handoff steps), popping the job with ``reply``.

        Returns the job's result (``reply``, committed; no summary due). Raises a
        :class:`ChatServiceError` when the session cannot be saved.
        """
        entry = Delivery.of(held.job, reply)
        try:
            locked = await self._held(conversation_key, held)
            session = self._session_or_new(locked)
            updated = change(session)
            completion = JobCompletion(
                job_raw=held.job_raw, job_id=held.job.job_id, outbox_entry=entry.stored()
            )
            await self.store.commit(locked, updated, completion=completion, release=False)
        except SessionStoreError as error:
            raise _translate_store_error(error, entry.turn_id) from error
        return JobDone(delivery=entry)

    async def answer_action(
        self, context: TurnContext, held: JobContext, settled: SessionChange
    ) -> JobDone:
        """Commit a pressed card whose confirmed read the model answers from.

        The model gets the conversation and the confirmed call's result as that call's
        tool message, and writes the answer the customer reads; the press's card edit,
        staff steps and audit go with it in one commit. A model that cannot answer (or
        proposes another action here) leaves the application's outcome
        (``settled.reply``), committed as any press is.
        """
        if settled.tool_result is None or settled.action_id is None:
            return await self.commit_without_turn(
                context.conversation_key, held, settled.change, settled.reply
            )
        started = perf_counter()
        recorder = TurnAuditRecorder(
            chat_id=str(context.chat_id),
            turn_id=context.turn_id,
            model=self.model_name,
            queue_ms=held.queue_ms,
            language=context.language or "",
        )
        try:
            locked = await self._held(context.conversation_key, held)
            session = self._session_or_new(locked)
            prepared = self.window.prepare(
                self.instruction(context.language), session.summary, session.messages, ""
            )
            call_id = f"press_{settled.action_id}"
            messages = (
                *prepared.messages[:-1],
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": settled.tool_name or "", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": call_id, "content": settled.tool_result},
            )
            result = await self.loop.run(messages, context, observer=recorder)
        except (ToolLoopError, SessionStoreError) as error:
            logger.warning(
                "Turn %s: the model did not answer from a confirmed read (%s): its outcome "
                "is told instead",
                context.turn_id,
                type(error).__name__,
            )
            return await self.commit_without_turn(
                context.conversation_key, held, settled.change, settled.reply
            )
        if result.proposal is not None:
            # One card per press: the confirmed read is told as the application words it.
            return await self.commit_without_turn(
                context.conversation_key, held, settled.change, settled.reply
            )
        updated = session.with_action_outcome(
            settled.action_id, result.text, _now(), context.turn_id
        )
        # The model's answer is the text the press tells (its card's edit and relays stay).
        answer = SendText(text=result.text, answer=True)
        entry = Delivery.of(
            held.job,
            Reply(
                steps=tuple(
                    answer if isinstance(step, SendText) else step for step in settled.reply.steps
                ),
                audit=settled.reply.audit
                + tuple(
                    item.to_fields()
                    for item in self._audit_entries(recorder, TurnOutcome.ANSWERED, started)
                ),
            ),
        )
        completion = JobCompletion(
            job_raw=held.job_raw, job_id=held.job.job_id, outbox_entry=entry.stored()
        )
        try:
            await self.store.commit(locked, updated, completion=completion, release=False)
        except SessionStoreError as error:
            raise _translate_store_error(error, context.turn_id) from error
        return JobDone(delivery=entry)

    async def keep_photo(
        self,
        conversation_key: str,
        held: JobContext,
        caption: str,
        file_id: str,
        *,
        staff: tuple[StaffAction, ...] = (),
    ) -> JobDone:
        """Keep a photo in the history without a model turn or an answer, popping its job.

        For an album's photo queued after its album's turn ran: the customer sent one
        message, so one answer; the model reads the photo's marker and caption on the
        next turn, and actions (a return) attach it. ``staff``: relay steps after it.
        Raises a :class:`ChatServiceError` as :meth:`commit_without_turn` does.
        """
        turn_id = held.job.turn_id
        content = self._question(caption, TurnInput(kind="photo"), turn_id)
        reply = Reply.of(StaffRelay(actions=staff) if staff else None)
        now = _now()

        def change(session: ConversationSession) -> ConversationSession:
            return session.with_customer_photo(content, (file_id,), now, turn_id)

        return await self.commit_without_turn(conversation_key, held, change, reply)

    def _audit_entries(
        self, recorder: TurnAuditRecorder, outcome: TurnOutcome, started: float
    ) -> list[AuditEntry]:
        return recorder.entries(
            outcome=outcome,
            latency_ms=(perf_counter() - started) * 1000,
            prompt_id=self.prompt.prompt_id,
            prompt_version=self.prompt.version,
        )

    async def reset(self, conversation_key: str, *, token: str) -> None:
        """Start a fresh conversation; the old session is archived for support staff.

        ``token`` is the lease of the front end that holds the conversation.
        """
        try:
            locked = await self.store.reload(conversation_key, token)
            await self.store.archive(locked, release=False)
        except SessionStoreError as error:
            raise _translate_store_error(error, "") from error

    async def drain(self, grace_seconds: float) -> None:
        """Wait (at most ``grace_seconds``) for background summaries, then cancel the rest."""
        await self._summaries_in_background.drain(grace_seconds)

    async def summarise(self, conversation_key: str, *, token: str) -> None:
        """Fold the oldest messages into the summary; on failure keep everything for later.

        ``token`` is the lease of a worker holding the conversation (the summary
        is saved under it).
        """
        try:
            locked = await self.store.reload(conversation_key, token)
            session = locked.session
            if session is None or (folded := self.window.fold_count(session.messages)) == 0:
                return
            summary = await self.summaries.summarise(session.summary, session.messages[:folded])
            await self.store.commit(
                locked, session.with_summary(summary, folded, _now()), release=False
            )
        except SummaryError:
            _summary_failed(conversation_key)
        except SessionStoreError:
            _summary_not_saved(conversation_key)

    def summarise_later(self, conversation_key: str) -> bool:
        """Fold old messages in a background task, the lease taken only for the save.

        For a front end that cannot hold the lease while the summary's model call
        runs (the console: the next prompt must not wait for it). ``True`` if
        started (one runs per conversation at a time).
        """
        return self._summaries_in_background.schedule(conversation_key)

    async def mark_undelivered(self, conversation_key: str, token: str, turn_id: str) -> None:
        """Record in the history that the answer of ``turn_id`` never reached the customer."""
        try:
            locked = await self.store.reload(conversation_key, token)
            if locked.session is not None:
                await self.store.commit(
                    locked, locked.session.with_undelivered(turn_id), release=False
                )
        except SessionStoreError as error:
            raise _translate_store_error(error, turn_id) from error

    def _question(self, text: str, turn_input: TurnInput, turn_id: str) -> str:
        """The customer's message as the history keeps it: a voice or a photo marked so."""
        if turn_input.kind == "photo":
            # A photo may come without a caption: the marker alone is the message then.
            caption = replace_lone_surrogates(text).strip()
            return (
                f"{PHOTO_MARK} {self._validate_input(caption, turn_id)}" if caption else PHOTO_MARK
            )
        question = self._validate_input(text, turn_id)
        if turn_input.kind == "voice":
            return f"{SPEECH_MARK}{question}"
        return question

    def _validate_input(self, text: str, turn_id: str) -> str:
        # A lone surrogate (a pasted line cut mid-character, bytes a terminal could not
        # decode) cannot be encoded for the model or stored; the rest of the text can.
        question = replace_lone_surrogates(text).strip()
        if not question:
            raise EmptyMessageError("the message is empty", turn_id)
        if len(question) > self.limits.max_message_chars:
            raise MessageTooLongError(
                f"the message has {len(question)} characters, "
                f"more than MAX_MESSAGE_CHARS={self.limits.max_message_chars}",
                turn_id,
            )
        return question

    async def _summarise_unheld(self, conversation_key: str) -> None:
        try:
            await self._fold_unheld(conversation_key)
        except SummaryError:
            _summary_failed(conversation_key)
        except SessionStoreError:
            _summary_not_saved(conversation_key)

    async def _fold_unheld(self, conversation_key: str) -> None:
        session = await self.store.load(conversation_key)
        if session is None:
            return
        folded = self.window.fold_count(session.messages)
        if folded == 0:
            return
        summary = await self.summaries.summarise(session.summary, session.messages[:folded])
        async with self._locks.hold(conversation_key):
            locked = await self.store.acquire(
                conversation_key,
                lease_seconds=self.limits.lease_seconds,
                wait_seconds=self.limits.wait_seconds,
            )
            current = locked.session
            if current is None or not _unchanged_head(current, session, folded):
                # A /new or another summary got there first; this one is stale.
                await self._release_quietly(locked)
                return
            await self.store.commit(locked, current.with_summary(summary, folded, _now()))

    async def _release_quietly(self, locked: LockedSession) -> None:
        # The lease expires by itself; failing to release early must not hide the real error.
        try:
            await self.store.release(locked)
        except SessionStoreError:
            logger.warning("Could not release the lease of %s", chat_label(locked.conversation_key))


def _summary_failed(conversation_key: str) -> None:
    logger.warning("Summary of %s failed; will retry on a later turn", chat_label(conversation_key))


def _summary_not_saved(conversation_key: str) -> None:
    logger.warning("Summary of %s not saved: storage unavailable", chat_label(conversation_key))


def _unchanged_head(current: ConversationSession, loaded: ConversationSession, folded: int) -> bool:
    return (
        current.session_id == loaded.session_id
        and current.summary == loaded.summary
        and current.messages[:folded] == loaded.messages[:folded]
    )


def _now() -> datetime:
    return datetime.now(UTC)


def _translate_store_error(error: SessionStoreError, turn_id: str) -> ChatServiceError:
    if isinstance(error, SessionLockTimeoutError):
        return ChatBusyError("the conversation is busy", turn_id)
    return ChatStorageError("session storage is unavailable", turn_id)


def _with_images(message: Message, turn_input: TurnInput) -> Message:
    """The customer's ``message`` with its images as image parts after its text.

    Built once per turn, before the tool loop: each image is encoded once and the
    same part goes with every model call of the turn.
    """
    parts: list[object] = [{"type": "text", "text": message["content"]}]
    parts.extend(EncodedPart.image(image.data_url) for image in turn_input.images)
    if turn_input.images_note:
        parts.append({"type": "text", "text": turn_input.images_note})
    return {**message, "content": parts}


def _turn_end(
    before: ConversationSession | None,
    result: ToolLoopResult,
    *,
    context: TurnContext,
    question: str,
    turn_input: TurnInput,
    customer: HandoffTurn | None,
) -> TurnEnd:
    """The loop's result as turn items, for the parts that own them."""
    proposal = None
    if result.proposal is not None:
        proposal = ActionProposed(
            action=result.proposal,
            superseded=before.pending_action if before is not None else None,
        )
    return TurnEnd(
        context=context,
        before=before,
        question=question,
        turn_input=turn_input,
        customer=customer,
        answer=result.text,
        proposal=proposal,
        handoff=HandoffAsked(reason=result.handoff.reason) if result.handoff is not None else None,
    )
