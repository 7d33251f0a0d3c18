"""A feature's part in a worker's jobs: its notices, its delivery steps, its schedules.

The job runner (:class:`~bot.telegram.update_jobs.TelegramJobRunner`) names no
feature. Each feature's Telegram twin (:mod:`bot.telegram.feature_routers`) says,
besides its routers, what it adds to the jobs a worker runs, as a
:class:`FeatureJobs` built from the worker's :class:`WorkerKit`:

- ``steps``: the deliverer of each step kind its replies are made of;
- ``notices``: the handler of each :class:`~bot.queue.jobs.Notice` it queues (the
  satisfaction question, the offer of a person, the idle check of a handoff, ...);
  a notice whose feature is off has no handler and is dropped as nothing due;
- ``after_answer``: what is due once the bot's answer reached the customer (one
  schedule entry per hook; the runner writes them all in one round trip);
- ``after_handoff_closed``: what runs once a reply closing a handoff reached them;
- ``given_up``: what settles a job given up as a dead letter instead of the kind
  failure message (a press on a card, staff's press on a suggestion).

:meth:`JobHooks.of` puts the features' parts together, in the order of the twins,
for the runner.
"""

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from bot.app import Application
from bot.engine.chat_service import ChatService
from bot.language.choice import ConversationLanguages
from bot.queue.chat_queue import ChatState
from bot.queue.job_results import JobContext, JobOutcome
from bot.queue.jobs import Notice, QueuedJob
from bot.queue.worker import HeldLease
from bot.storage.due_set import DueEntry
from bot.telegram.delivery import Outgoing, StepRoute
from bot.telegram.middlewares.language import stored_language


@dataclass(frozen=True, kw_only=True)
class JobRun:
    """One job a feature's handler runs: the chat's state, its lease, the job and its context.

    ``languages``: the customer's texts per language (``None``: the source texts).
    """

    state: ChatState
    lease: HeldLease
    job: QueuedJob
    context: JobContext
    languages: ConversationLanguages | None = None

    @property
    def conversation_key(self) -> str:
        """The conversation the job belongs to (the lease's)."""
        return self.lease.conversation_key

    def language(self) -> str | None:
        """The conversation's language as its session keeps it now (``None``: source texts)."""
        return job_language(self.languages, self.context)


def job_language(languages: ConversationLanguages | None, context: JobContext) -> str | None:
    """The conversation's language as the job's session keeps it (``None``: source texts)."""
    if languages is None:
        return None
    return languages.decide(stored_language(context))


NoticeHandler = Callable[[JobRun], Awaitable[JobOutcome]]
"""Runs a notice's job: what happened to it (a reply, done, or dropped as nothing due)."""

GivenUpHandler = Callable[[JobRun], Awaitable[JobOutcome | None]]
"""Settles a job given up as a dead letter; ``None``: not one of this feature's."""

AfterAnswer = Callable[[str], DueEntry | None]
"""What is due in a conversation (its key) after the bot's answer; ``None``: nothing."""

AfterHandoffClosed = Callable[[str], Awaitable[None]]
"""What runs in a conversation (its key) once a handoff closed there; never raises."""


def _no_notices() -> Mapping[Notice, NoticeHandler]:
    return MappingProxyType({})


@dataclass(frozen=True, kw_only=True)
class FeatureJobs:
    """One feature's part in the worker's jobs (see the module's text); by default none."""

    steps: tuple[StepRoute, ...] = ()
    notices: Mapping[Notice, NoticeHandler] = field(default_factory=_no_notices)
    after_answer: tuple[AfterAnswer, ...] = ()
    after_handoff_closed: tuple[AfterHandoffClosed, ...] = ()
    given_up: tuple[GivenUpHandler, ...] = ()


@dataclass(frozen=True, kw_only=True)
class WorkerKit:
    """What a twin builds its :class:`FeatureJobs` from: the application, the worker's
    sending (``out``) and its chat service (``chat``: a test's watched one may stand in)."""

    app: Application
    out: Outgoing
    chat: ChatService


def no_jobs(kit: WorkerKit) -> FeatureJobs:
    """A twin that adds nothing to the worker's jobs (its feature only has routers)."""
    return FeatureJobs()


@dataclass(frozen=True, kw_only=True)
class JobHooks:
    """The features' parts together (without the steps, which go to the deliverers)."""

    notices: Mapping[Notice, NoticeHandler] = field(default_factory=_no_notices)
    after_answer: tuple[AfterAnswer, ...] = ()
    after_handoff_closed: tuple[AfterHandoffClosed, ...] = ()
    given_up: tuple[GivenUpHandler, ...] = ()

    @classmethod
    def of(cls, parts: Iterable[FeatureJobs]) -> "JobHooks":
        """The parts' hooks in their order; a notice handled twice is a wiring mistake."""
        notices: dict[Notice, NoticeHandler] = {}
        after_answer: list[AfterAnswer] = []
        after_handoff_closed: list[AfterHandoffClosed] = []
        given_up: list[GivenUpHandler] = []
        for part in parts:
            for notice, handler in part.notices.items():
                if notice in notices:
                    raise ValueError(f"two handlers of the notice {notice.value}")
                notices[notice] = handler
            after_answer.extend(part.after_answer)
            after_handoff_closed.extend(part.after_handoff_closed)
            given_up.extend(part.given_up)
        return cls(
            notices=MappingProxyType(notices),
            after_answer=tuple(after_answer),
            after_handoff_closed=tuple(after_handoff_closed),
            given_up=tuple(given_up),
        )

    def due_after_answer(self, conversation_key: str) -> list[DueEntry]:
        """Every feature's schedule after an answer in ``conversation_key``, to write at once."""
        due = [hook(conversation_key) for hook in self.after_answer]
        return [entry for entry in due if entry is not None]
