"""What a handler gives back to the worker: the reply to commit and deliver, never a send.

Handlers run inside a worker that holds the chat's lease (:class:`JobContext`
reaches them as workflow data ``job``). A chat turn commits its reply itself
(session, pop and outbox in one script) and returns :class:`Committed`; every
other handler returns :class:`PlainReply`, which the worker commits (pop and
outbox) before delivering.
"""

from dataclasses import dataclass

from bot.handoff.staff_actions import StaffAction
from bot.queue.jobs import CardEdit, OutboxEntry, QueuedJob


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext:
    """The queued job a handler runs, and the lease and session state its worker holds."""

    job: QueuedJob
    job_raw: str
    token: str
    queue_ms: float
    session_version: str
    session_data: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Committed:
    """The chat turn committed its reply; the worker delivers it."""

    reply: OutboxEntry
    summary_due: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PlainReply:
    """The bot's own text for the customer (and a failed turn's audit entries).

    ``staff`` are handoff relay steps the worker runs after delivering it;
    ``card_edit`` a message of the bot's to rewrite first. An empty ``text``
    sends nothing (an edit and audit entries only).
    """

    text: str
    audit: tuple[dict[str, str], ...] = ()
    staff: tuple[StaffAction, ...] = ()
    card_edit: CardEdit | None = None


JobResult = Committed | PlainReply
