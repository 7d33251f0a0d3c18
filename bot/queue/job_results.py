"""What a worker (or the console) holds for a job, and what a handler gives back to it.

Handlers run inside a worker that holds the chat's lease (:class:`JobContext`
reaches them as workflow data ``job``, and the chat service's turn takes the
same value). A handler that commits its reply itself (a chat turn: session,
pop and outbox in one script; a handoff step; a pressed card) returns
:class:`JobDone`; every other handler returns :class:`PlainReply`, which the
worker commits (pop and outbox) before delivering. Never a send.
"""

from dataclasses import dataclass

from bot.queue.jobs import CardEdit, OutboxEntry, QueuedJob, ReplyKeyboardKind
from bot.queue.staff_actions import StaffAction


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext:
    """The job a front end runs, the lease it holds for it, and the session read with it.

    A worker's: the queued job at the chat's head (``job_raw`` as stored), its
    time in the queue. The console's (:meth:`bot.engine.chat_service.ChatService.hold`):
    no queued job behind it (``job_raw`` empty, so a commit pops nothing) and no
    queue time.
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


@dataclass(frozen=True, slots=True, kw_only=True)
class JobDone:
    """A job's reply, committed to the chat's outbox (or none), and whether a summary is due.

    What a committing handler returns, and what a job runner returns to the worker.
    """

    reply: OutboxEntry | None
    summary_due: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PlainReply:
    """The bot's own text for the customer (and a failed turn's audit entries).

    ``staff`` are handoff relay steps the worker runs after delivering it;
    ``card_edit`` a message of the bot's to rewrite first; ``reply_keyboard`` a
    reply keyboard sent with the text. An empty ``text`` sends nothing (an edit
    and audit entries only).
    """

    text: str
    audit: tuple[dict[str, str], ...] = ()
    staff: tuple[StaffAction, ...] = ()
    card_edit: CardEdit | None = None
    reply_keyboard: ReplyKeyboardKind | None = None


JobResult = JobDone | PlainReply
