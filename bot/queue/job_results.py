"""What a worker (or the console) holds for a job, and what comes back to the worker.

Handlers run inside a worker that holds the chat's lease (:class:`JobContext`
reaches them as workflow data ``job``, and the chat service's turn takes the
same value). A handler that changes the session commits its reply itself,
because the session, the job's pop and the reply must be one script (a chat
turn, a handoff step, a pressed card): it returns :class:`JobDone`. Every
other handler returns a :class:`~bot.queue.delivery.Reply`. Never a send.

Both are a :data:`JobOutcome`, what the front end's job runner hands the
worker, which alone finishes the job from that value (:mod:`bot.queue.worker`):
:class:`JobDone` (committed already: deliver it), a
:class:`~bot.queue.delivery.Reply` (pop the job with this reply, then deliver
it) or :class:`JobDropped` (pop the job, nothing to say). A job whose run
overruns the worker's deadline has no outcome: the worker counts it as a
failed attempt.
"""

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

from bot.queue.delivery import Delivery, Reply
from bot.queue.jobs import QueuedJob
from bot.sessions.models import ConversationSession, session_of


@dataclass(frozen=True, kw_only=True)
class JobContext:
    """The job a front end runs, the lease it holds for it, and the session read with it.

    A worker's: the queued job at the chat's head (``job_raw`` as stored), its
    time in the queue. The console's (:meth:`bot.engine.chat_service.ChatService.hold`):
    no queued job behind it (``job_raw`` empty, so a commit pops nothing) and no
    queue time. :attr:`session` is ``session_data`` read once, on first use, and
    shared by every part that runs the job (filters, middlewares, handlers, the
    store's commit): no slots, so the parse is cached on the instance.
    """

    job: QueuedJob
    job_raw: str
    token: str
    queue_ms: float | None
    session_version: str
    session_data: str
    # The console's: the turn's commit hands the lease back in the same script (no
    # queued job follows), so the hold has nothing left to release.
    release_on_commit: bool = False
    # ``session_data`` read already by whoever took the lease (the console's hold).
    parsed: ConversationSession | None = None

    @cached_property
    def session(self) -> ConversationSession | None:
        """The session read with the job (``None`` when new or unreadable), parsed once."""
        if self.parsed is not None:
            return self.parsed
        return session_of(self.session_data)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobDone:
    """A job's reply, committed to the chat's outbox, and whether a summary is due.

    What a committing handler returns, and what a job runner returns to the worker.
    """

    delivery: Delivery
    summary_due: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionChange:
    """A change of the held session outside a model turn, for the caller to commit.

    What a part that decides without committing returns (a pressed card): the
    front end commits ``change`` with the job's pop and ``reply`` in one script
    (``ChatService.commit_without_turn``), and the result is a :class:`JobDone`.
    """

    change: Callable[[ConversationSession], ConversationSession]
    reply: Reply
    # A confirmed read: the model answers from this tool message instead of ``reply``'s
    # text (``ChatService.answer_action``); ``reply`` is the answer if it cannot.
    tool_result: str | None = None
    tool_name: str | None = None
    action_id: str | None = None


class DropReason(StrEnum):
    """Why a job ends without a word to anyone (the worker logs it)."""

    # The queued job, or its update, cannot be read by this version.
    UNREADABLE = "unreadable"
    # No handler took the update (or one returned nothing to say).
    UNHANDLED = "unhandled"
    # A check the bot queued for itself found nothing to do (idle handoff, question, offer).
    NOTHING_DUE = "nothing_due"
    # The bot's own notice or check given up after its attempts: nobody waits for it.
    GIVEN_UP_NOTICE = "given_up_notice"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobDropped:
    """Nothing to say: the worker pops the job, and logs ``reason``."""

    reason: DropReason


JobOutcome = JobDone | Reply | JobDropped
"""What happened to a job: what a handler returns, and what a job runner tells the worker."""
