"""What a model turn came to, as turn items, and what the parts that own them add.

"Turn items" are the engine's typed values of one turn; the audit's closed word for how
a turn ended is its outcome (:class:`turn.TurnOutcome`), a different thing.

A turn ends with the model's answer, and perhaps an :class:`ActionProposed`
(a write the model proposed, waiting for the customer's button) and a
:class:`HandoffAsked` (the model called for a person). The chat service does
not decide what follows from them: each part that owns an outcome is a
:data:`TurnFollower` (the action cards in :mod:`bot.actions.turns`, the
handoff policy in :mod:`bot.handoff.turns`), given the :class:`TurnEnd` and
the :class:`FollowUp` so far, returning the next one. The chat service then
commits the turn with what followed, in one script, as before: a follower
decides, it never commits nor sends.
"""

from collections.abc import Callable
from dataclasses import dataclass

from bot.queue.delivery_steps import DeliveryStep
from bot.queue.staff_actions import HandoffTurn
from bot.sessions.models import ConversationSession
from bot.sessions.pending import PendingAction
from turn import TurnContext, TurnInput


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionProposed:
    """A write the model proposed; ``superseded`` is the pending action it replaces."""

    action: PendingAction
    superseded: PendingAction | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffAsked:
    """The model called ``request_human_agent`` with this ``reason``."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnd:
    """One turn's outcomes and what they came from, before the commit.

    ``before``: the session the turn started from (``None`` for a new one);
    ``question``: the customer's message as the history keeps it; ``customer``:
    who wrote, for a front end with a staff chat (Telegram), else ``None``;
    ``answer``: the model's answer to the customer (after the help-center link check).
    """

    context: TurnContext
    before: ConversationSession | None
    question: str
    turn_input: TurnInput
    customer: HandoffTurn | None
    answer: str
    proposal: ActionProposed | None
    handoff: HandoffAsked | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowUp:
    """What follows a turn, committed with it: the session to save and the reply's extras.

    ``session`` starts as the session with the turn (and its pending action);
    ``note`` goes before the answer, in its text; ``steps`` are delivered after
    the answer, in order (a proposal's card, the handoff's staff relays);
    ``ends_failed_streak``: an answer ends the chat's streak of failed turns (set
    by the handoff part, the only one that records a streak: without it the
    commit skips the delete).
    """

    session: ConversationSession
    steps: tuple[DeliveryStep, ...] = ()
    audit: tuple[dict[str, str], ...] = ()
    note: str | None = None
    ends_failed_streak: bool = False


TurnFollower = Callable[[TurnEnd, FollowUp], FollowUp]
"""A part that owns an outcome: given the turn's end and the follow-up so far, the next."""
