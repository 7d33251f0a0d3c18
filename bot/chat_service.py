"""One customer turn: session, history window, tool loop, save, audit, summary."""

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from time import perf_counter

from bot.audit.entries import AuditSink
from bot.chat_errors import (
    ChatBadRequestError,
    ChatBusyError,
    ChatLimitError,
    ChatModelProtocolError,
    ChatModelUnavailableError,
    ChatServiceError,
    ChatStorageError,
    ChatToolFailureError,
    EmptyMessageError,
    MessageTooLongError,
)
from bot.history import HistoryWindow
from bot.keyed_locks import KeyedLocks
from bot.llm.errors import LLMBadResponseError, LLMRequestError
from bot.sessions.models import ConversationSession
from bot.sessions.store import (
    LockedSession,
    SessionLockTimeoutError,
    SessionStore,
    SessionStoreError,
)
from bot.summary import ConversationSummaryService, SummaryError
from bot.surrogates import replace_lone_surrogates
from bot.tool_loop import (
    BoundedToolLoop,
    ToolLoopError,
    ToolLoopExecutionError,
    ToolLoopLimitError,
    ToolLoopProtocolError,
)
from bot.turn_audit import TurnAuditRecorder
from prompts.template import PromptTemplate
from tools.context import ToolContext
from tools.execution import ToolTechnicalError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChatReply:
    """The answer of one turn and what it took.

    ``history_messages`` counts the stored history after this turn;
    ``context_history_messages`` how many of them the model saw and
    ``removed_history_messages`` how many did not fit the window.
    ``summary_updated`` says a summary update was started for messages that
    left the window (it runs after the reply); ``has_summary`` that the
    session carries one. Token counts are summed over the turn's model calls,
    ``None`` when any call did not report them.
    """

    text: str
    turn_id: str
    session_id: str
    history_messages: int
    context_history_messages: int
    removed_history_messages: int
    estimated_prompt_tokens: int
    model: str
    prompt_id: str
    prompt_version: str
    elapsed_seconds: float
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    response_id: str
    response_ids: tuple[str, ...]
    model_steps: int
    tool_calls_count: int
    tool_names: tuple[str, ...]
    summary_updated: bool
    has_summary: bool


@dataclass(frozen=True, slots=True)
class ChatLimits:
    """How long a turn may hold its conversation, and how long another may wait."""

    lease_seconds: float
    wait_seconds: float
    max_message_chars: int = 4000


class ChatService:
    """Runs customer turns; the only thing front ends (Telegram, console) talk to.

    Turns of one conversation are serialised twice: in this process, in arrival
    order (:class:`KeyedLocks`); across processes, by the store's lease and its
    version check. A failed turn writes nothing into the history. Messages that
    leave the history window are folded into the summary *after* the reply, in
    a background task, so the customer never waits for it.
    """

    def __init__(
        self,
        *,
        store: SessionStore,
        loop: BoundedToolLoop,
        window: HistoryWindow,
        summaries: ConversationSummaryService,
        audit: AuditSink,
        prompt: PromptTemplate,
        limits: ChatLimits,
        model_name: str,
    ) -> None:
        self._store = store
        self._loop = loop
        self._window = window
        self._summaries = summaries
        self._audit = audit
        self._prompt = prompt
        self._instruction = prompt.render()
        self._limits = limits
        self._model_name = model_name
        self._locks = KeyedLocks()
        self._summary_tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def prompt(self) -> PromptTemplate:
        """The active support chat prompt."""
        return self._prompt

    async def reply(self, conversation_key: str, text: str, context: ToolContext) -> ChatReply:
        """Answer one message; raises a :class:`ChatServiceError` subtype on failure."""
        started = perf_counter()
        recorder = TurnAuditRecorder(
            chat_id=str(context.chat_id), turn_id=context.turn_id, model=self._model_name
        )
        outcome = "answered"
        try:
            question = self._validate_input(text, context.turn_id)
            return await self._reply(conversation_key, question, context, recorder, started)
        except ChatServiceError as error:
            outcome = error.kind
            raise
        except ToolLoopError as error:
            translated = _translate_loop_error(error, context.turn_id)
            outcome = translated.kind
            # Our own messages carry no customer text; a crashed tool's trace is a bug to see.
            logger.warning(
                "Turn %s failed (%s): %s",
                context.turn_id,
                translated.kind,
                error,
                exc_info=isinstance(error.__cause__, ToolTechnicalError),
            )
            raise translated from error
        except SessionStoreError as error:
            translated = _translate_store_error(error, context.turn_id)
            outcome = translated.kind
            raise translated from error
        except Exception:
            # A bug, not an answer: the audit must not call the turn answered.
            outcome = ChatServiceError.kind
            raise
        finally:
            await self._audit.write(
                recorder.entries(
                    outcome=outcome,
                    latency_ms=(perf_counter() - started) * 1000,
                    prompt_id=self._prompt.prompt_id,
                    prompt_version=self._prompt.version,
                )
            )

    async def _reply(
        self,
        conversation_key: str,
        question: str,
        context: ToolContext,
        recorder: TurnAuditRecorder,
        started: float,
    ) -> ChatReply:
        async with self._locks.hold(conversation_key):
            locked = await self._store.acquire(
                conversation_key,
                lease_seconds=self._limits.lease_seconds,
                wait_seconds=self._limits.wait_seconds,
            )
            committed = False
            try:
                session = locked.session or ConversationSession.start(
                    conversation_key, _now(), self._prompt.prompt_id, self._prompt.version
                )
                prepared = self._window.prepare(
                    self._instruction, session.summary, session.messages, question
                )
                result = await self._loop.run(prepared.messages, context, observer=recorder)
                updated = session.with_turn(question, result.text, _now(), self._prompt.version)
                await self._store.commit(locked, updated)
                committed = True
            finally:
                if not committed:
                    await self._release_quietly(locked)
        summary_scheduled = self._window.overflows(updated.messages) and self._schedule_summary(
            conversation_key
        )
        return ChatReply(
            text=result.text,
            turn_id=context.turn_id,
            session_id=updated.session_id,
            history_messages=len(updated.messages),
            context_history_messages=prepared.context_history_messages,
            removed_history_messages=prepared.removed_history_messages,
            estimated_prompt_tokens=prepared.estimated_tokens,
            model=result.model,
            prompt_id=self._prompt.prompt_id,
            prompt_version=self._prompt.version,
            elapsed_seconds=perf_counter() - started,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            total_tokens=result.total_tokens,
            response_id=result.response_ids[-1],
            response_ids=result.response_ids,
            model_steps=result.model_steps,
            tool_calls_count=result.tool_calls_count,
            tool_names=result.tool_names,
            summary_updated=summary_scheduled,
            has_summary=updated.summary is not None,
        )

    async def reset(self, conversation_key: str) -> None:
        """Start a fresh conversation; the old session is archived for support staff."""
        try:
            async with self._locks.hold(conversation_key):
                locked = await self._store.acquire(
                    conversation_key,
                    lease_seconds=self._limits.lease_seconds,
                    wait_seconds=self._limits.wait_seconds,
                )
                await self._store.archive(locked)
        except SessionStoreError as error:
            raise _translate_store_error(error, "") from error

    async def drain(self, grace_seconds: float) -> None:
        """Wait (at most ``grace_seconds``) for background summaries, then cancel the rest."""
        tasks = list(self._summary_tasks.values())
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _validate_input(self, text: str, turn_id: str) -> str:
        # A lone surrogate (a pasted line cut mid-character, bytes a terminal could not
        # decode) cannot be encoded for the model or stored; the rest of the text can.
        question = replace_lone_surrogates(text).strip()
        if not question:
            raise EmptyMessageError("Сообщение пустое: напишите, пожалуйста, ваш вопрос.", turn_id)
        if len(question) > self._limits.max_message_chars:
            raise MessageTooLongError(
                f"Сообщение слишком длинное: уложитесь, пожалуйста, в "
                f"{self._limits.max_message_chars} символов.",
                turn_id,
            )
        return question

    def _schedule_summary(self, conversation_key: str) -> bool:
        running = self._summary_tasks.get(conversation_key)
        if running is not None and not running.done():
            return False
        task = asyncio.create_task(
            self._summarise(conversation_key), name=f"summary:{conversation_key}"
        )
        self._summary_tasks[conversation_key] = task
        task.add_done_callback(lambda done: self._forget_summary(conversation_key, done))
        return True

    def _forget_summary(self, conversation_key: str, task: asyncio.Task[None]) -> None:
        if self._summary_tasks.get(conversation_key) is task:
            del self._summary_tasks[conversation_key]

    async def _summarise(self, conversation_key: str) -> None:
        """Fold the oldest messages into the summary; on failure keep everything for later."""
        try:
            session = await self._store.load(conversation_key)
            if session is None:
                return
            folded = self._window.fold_count(session.messages)
            if folded == 0:
                return
            summary = await self._summaries.summarise(session.summary, session.messages[:folded])
            async with self._locks.hold(conversation_key):
                locked = await self._store.acquire(
                    conversation_key,
                    lease_seconds=self._limits.lease_seconds,
                    wait_seconds=self._limits.wait_seconds,
                )
                current = locked.session
                if current is None or not _unchanged_head(current, session, folded):
                    # A /new or another summary got there first; this one is stale.
                    await self._release_quietly(locked)
                    return
                await self._store.commit(locked, current.with_summary(summary, folded, _now()))
        except SummaryError:
            logger.warning("Summary of %s failed; will retry on a later turn", conversation_key)
        except SessionStoreError:
            logger.warning("Summary of %s not saved: storage unavailable", conversation_key)

    async def _release_quietly(self, locked: LockedSession) -> None:
        # The lease expires by itself; failing to release early must not hide the real error.
        try:
            await self._store.release(locked)
        except SessionStoreError:
            logger.warning("Could not release the lease of %s", locked.conversation_key)


def _unchanged_head(current: ConversationSession, loaded: ConversationSession, folded: int) -> bool:
    return (
        current.session_id == loaded.session_id
        and current.summary == loaded.summary
        and current.messages[:folded] == loaded.messages[:folded]
    )


def _now() -> datetime:
    return datetime.now(UTC)


def _translate_loop_error(error: ToolLoopError, turn_id: str) -> ChatServiceError:
    cause = error.__cause__
    if isinstance(error, ToolLoopExecutionError):
        return ChatToolFailureError("a tool call could not be executed", turn_id)
    if isinstance(error, ToolLoopLimitError):
        return ChatLimitError("the turn ran out of steps", turn_id)
    if isinstance(error, ToolLoopProtocolError) or isinstance(cause, LLMBadResponseError):
        return ChatModelProtocolError("the model answered outside the protocol", turn_id)
    if isinstance(cause, LLMRequestError):
        return ChatBadRequestError("the model provider refused the request", turn_id)
    return ChatModelUnavailableError("the model is unavailable", turn_id)


def _translate_store_error(error: SessionStoreError, turn_id: str) -> ChatServiceError:
    if isinstance(error, SessionLockTimeoutError):
        return ChatBusyError("the conversation is busy", turn_id)
    return ChatStorageError("session storage is unavailable", turn_id)
