"""The handoff state machine: who answers the customer, what moves that, what each move does.

States (:data:`bot.sessions.models.HandoffState`):

* ``bot``: the model answers; no topic is watched.
* ``waiting``: a person was asked for; the model still answers, and each exchange is
  mirrored to the customer's staff topic.
* ``human``: staff wrote in the topic; the model is silent, the customer's messages go
  to the topic and the staff's to the customer.

The table, as :data:`TRANSITIONS` holds it (``staff``: the steps the worker runs in the
staff chat after the commit, :class:`bot.queue.staff_actions.StaffAction` kinds; ``audit``: the
``type=handoff`` events written):

=======  ===============  =======  ==========================  ======================
from     event            to       staff                       audit
=======  ===============  =======  ==========================  ======================
bot      customer_asks    waiting  open                        opened (command)
bot      model_asks       waiting  open                        opened (tool)
bot      turns_failed     waiting  open                        opened (failed_turns)
bot      staff_writes     human    copy_to_customer            opened (staff),
                                                               first_reply
bot      staff_closes     bot      post (already bot), ended   -
bot      bot_answers      bot      -                           -
bot      not_text         bot      -                           -
waiting  customer_asks    waiting  -                           -
waiting  model_asks       waiting  copy_to_topic, post_answer  -
waiting  bot_answers      waiting  copy_to_topic, post_answer  -
waiting  not_text         waiting  copy_to_topic               -
waiting  staff_writes     human    copy_to_customer            first_reply
human    customer_asks    human    -                           -
human    customer_writes  human    copy_to_topic               -
human    staff_writes     human    copy_to_customer            -
waiting  staff_closes     bot      post (closed), ended        closed (staff)
human    staff_closes     bot      post (closed), ended        closed (staff)
waiting  goes_idle        bot      post (idle), ended          closed (idle)
human    goes_idle        bot      post (idle), ended          closed (idle)
=======  ===============  =======  ==========================  ======================

What the customer reads: on ``customer_asks`` and ``turns_failed`` from ``bot``, that a
person was called (with the support hours when closed); on ``customer_asks`` otherwise,
that a person is already called; on a model turn, the model's answer; on ``staff_writes``,
the staff message itself; on ``staff_closes`` and ``goes_idle`` of an open handoff, that
the bot answers again.

**One idle rule** (:class:`IdleRule`): a handoff nobody wrote in (neither side) for
``HANDOFF_IDLE_MINUTES`` is over. Whoever meets it first applies ``goes_idle``: the idle
sweeper's check, or the next event of the conversation, which then starts from ``bot``
(its ``closed (idle)`` entry comes first). Any staff step but ``ended`` counts as activity.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from bot.sessions.models import ConversationSession, HandoffState


class HandoffEvent(StrEnum):
    """What can happen to a conversation's handoff."""

    CUSTOMER_ASKS = "customer_asks"
    """The customer sent ``/operator``."""
    MODEL_ASKS = "model_asks"
    """The model's ``request_human_agent`` call succeeded in a turn."""
    TURNS_FAILED = "turns_failed"
    """``HANDOFF_AFTER_FAILED_TURNS`` turns failed in a row."""
    BOT_ANSWERS = "bot_answers"
    """A model turn answered the customer."""
    NOT_TEXT = "not_text"
    """The customer sent something that is not text (no model call)."""
    CUSTOMER_WRITES = "customer_writes"
    """The customer wrote while a person answers."""
    STAFF_WRITES = "staff_writes"
    """A staff member wrote in the customer's topic."""
    STAFF_CLOSES = "staff_closes"
    """A staff member sent ``/close`` in the topic."""
    GOES_IDLE = "goes_idle"
    """Nobody wrote for ``HANDOFF_IDLE_MINUTES``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """One row of the table: from ``source`` on ``event`` to ``target``, with its effects."""

    source: HandoffState
    event: HandoffEvent
    target: HandoffState
    staff: tuple[str, ...] = ()
    audit: tuple[str, ...] = ()


def _rows() -> tuple[Transition, ...]:
    e = HandoffEvent
    closing = ("post", "ended")
    rows = [
        Transition(source="bot", event=e.CUSTOMER_ASKS, target="waiting", staff=("open",),
                   audit=("opened",)),
        Transition(source="bot", event=e.MODEL_ASKS, target="waiting", staff=("open",),
                   audit=("opened",)),
        Transition(source="bot", event=e.TURNS_FAILED, target="waiting", staff=("open",),
                   audit=("opened",)),
        Transition(source="bot", event=e.STAFF_WRITES, target="human",
                   staff=("copy_to_customer",), audit=("opened", "first_reply")),
        Transition(source="bot", event=e.STAFF_CLOSES, target="bot", staff=closing),
        Transition(source="bot", event=e.BOT_ANSWERS, target="bot"),
        Transition(source="bot", event=e.NOT_TEXT, target="bot"),
        Transition(source="waiting", event=e.CUSTOMER_ASKS, target="waiting"),
        Transition(source="waiting", event=e.MODEL_ASKS, target="waiting",
                   staff=("copy_to_topic", "post_answer")),
        Transition(source="waiting", event=e.BOT_ANSWERS, target="waiting",
                   staff=("copy_to_topic", "post_answer")),
        Transition(source="waiting", event=e.NOT_TEXT, target="waiting",
                   staff=("copy_to_topic",)),
        Transition(source="waiting", event=e.STAFF_WRITES, target="human",
                   staff=("copy_to_customer",), audit=("first_reply",)),
        Transition(source="human", event=e.CUSTOMER_ASKS, target="human"),
        Transition(source="human", event=e.CUSTOMER_WRITES, target="human",
                   staff=("copy_to_topic",)),
        Transition(source="human", event=e.STAFF_WRITES, target="human",
                   staff=("copy_to_customer",)),
    ]  # fmt: skip
    for source in ("waiting", "human"):
        rows += [
            Transition(source=source, event=e.STAFF_CLOSES, target="bot", staff=closing,
                       audit=("closed",)),
            Transition(source=source, event=e.GOES_IDLE, target="bot", staff=closing,
                       audit=("closed",)),
        ]  # fmt: skip
    return tuple(rows)


TRANSITIONS: tuple[Transition, ...] = _rows()
"""Every allowed move; an event not listed for a state is a bug (:func:`step` raises)."""

_BY_KEY = {(row.source, row.event): row for row in TRANSITIONS}


class HandoffTransitionError(LookupError):
    """An event the table has no row for in the given state."""


def step(state: HandoffState, event: HandoffEvent) -> Transition:
    """The table's row for ``event`` in ``state``."""
    try:
        return _BY_KEY[(state, event)]
    except KeyError:
        raise HandoffTransitionError(f"no handoff transition from {state} on {event}") from None


def utc_now() -> datetime:
    """The default clock: now, in UTC."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleRule:
    """The one idle rule: a handoff quiet for ``idle_seconds`` is over (``clock``: now)."""

    idle_seconds: float
    clock: Callable[[], datetime] = utc_now

    def now(self) -> datetime:
        """The rule's clock."""
        return self.clock()

    def now_ms(self) -> int:
        """The rule's clock in epoch milliseconds (the idle index's scores)."""
        return int(self.clock().timestamp() * 1000)

    def is_idle(self, session: ConversationSession, now: datetime | None = None) -> bool:
        """Whether ``session`` has a handoff nobody wrote in for ``idle_seconds``."""
        return session.handoff_idle(now or self.clock(), self.idle_seconds)

    def state(
        self, session: ConversationSession | None, now: datetime | None = None
    ) -> HandoffState:
        """Who answers now: an idle handoff counts as ended (``bot``)."""
        if session is None or self.is_idle(session, now):
            return "bot"
        return session.handoff
