"""What follows a turn that proposed an action: its card, its audit, the card it replaces.

A :data:`~bot.engine.turn_items.TurnFollower` for the chat service: the
turn's :class:`~bot.engine.turn_items.ActionProposed` outcome becomes the
confirmation card shown after the answer (a :class:`~bot.queue.delivery_steps.SendCard`
step) and the ``proposed`` (and
``superseded``) audit entries, committed with the turn.
"""

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.engine.action_audit import proposal_fields
from bot.engine.turn_items import FollowUp, TurnEnd
from bot.queue.delivery_steps import SendCard
from bot.sessions.pending import ActionCard


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionCards:
    """The action part's follower of a turn: a proposal's card and audit (else nothing)."""

    clock: Callable[[], datetime] = _now

    def __call__(self, end: TurnEnd, follow: FollowUp) -> FollowUp:
        """``follow`` with the proposal's card, audit and superseded card, if one was made."""
        proposal = end.proposal
        if proposal is None:
            return follow
        audit = proposal_fields(
            proposal.superseded,
            proposal.action,
            chat_id=str(end.context.chat_id),
            turn_id=end.context.turn_id,
            now=self.clock(),
        )
        card = SendCard(
            card=ActionCard(
                action_id=proposal.action.action_id,
                text=proposal.action.description,
                language=end.context.language,
            ),
            superseded=proposal.superseded.action_id if proposal.superseded is not None else None,
        )
        return dataclasses.replace(follow, audit=follow.audit + audit, steps=(*follow.steps, card))
