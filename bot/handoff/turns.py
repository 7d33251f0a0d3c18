"""The handoff policy of a model turn: what a turn's outcomes mean for a handoff.

A :data:`~bot.engine.turn_items.TurnFollower` for the chat service, only for
a front end with a staff chat (a turn with a ``customer``): a handoff idle too
long ends here (the customer is told, the topic too); in ``waiting`` the
question, the answer and any proposed card are mirrored to the topic; the
model's :class:`~bot.engine.turn_items.HandoffAsked` opens a handoff. The
chat service commits what this returns with the turn.
"""

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from bot import customer_texts
from bot.audit.assist import AssistAuditEntry
from bot.audit.schema import HandoffAuditEntry
from bot.engine.chat_service import SPEECH_MARK
from bot.engine.turn_items import FollowUp, TurnEnd
from bot.queue.delivery_steps import StaffRelay
from bot.queue.staff_actions import StaffAction, reason_of, staff_label, transcript_post
from bot.sessions.handoff_machine import HandoffEvent, IdleRule, step
from bot.sessions.models import ConversationSession, HandoffState
from bot.sessions.pending import CARD_MIRROR
from tools.write_tools import Localize, as_written

IDLE_TOPIC_NOTE = "Клиент долго не писал: разговор вернулся к боту."
"""Posted in the topic when a handoff ends because the customer went quiet."""


def closed_entry(
    session: ConversationSession, chat_id: str, turn_id: str, closed_by: str, now: datetime
) -> dict[str, str]:
    """The audit fields of a handoff ending now (``closed_by``: ``staff`` or ``idle``)."""
    since = session.handoff_since
    return HandoffAuditEntry(
        chat_id=chat_id,
        turn_id=turn_id,
        event="closed",
        closed_by=closed_by,
        duration_ms=(now - since).total_seconds() * 1000 if since is not None else None,
    ).to_fields()


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnHandoff:
    """The handoff part's follower of a turn (handoff on: a staff chat is set)."""

    idle: IdleRule
    # The note before the answer, in the turn's language (the catalogs; else as written).
    localize: Localize = as_written

    def __call__(self, end: TurnEnd, follow: FollowUp) -> FollowUp:
        """``follow`` with the turn's handoff consequences: state, staff steps, audit, note."""
        customer = end.customer
        if customer is None:
            # The console has no staff chat: its turns leave handoffs alone.
            return follow
        rule = self.idle
        now = rule.now()
        before = end.before
        updated = follow.session
        state: HandoffState = before.handoff if before is not None else "bot"
        chat = str(end.context.chat_id)
        turn_id = end.context.turn_id
        staff: tuple[StaffAction, ...] = ()
        audit: tuple[dict[str, str], ...] = ()
        note = follow.note
        if before is not None and rule.is_idle(before, now):
            state = step(state, HandoffEvent.GOES_IDLE).target
            updated = updated.with_handoff(state, now)
            staff = (StaffAction(kind="post", text=IDLE_TOPIC_NOTE), StaffAction(kind="ended"))
            audit = (closed_entry(before, chat, turn_id, "idle", now),)
            if before.suggestion is not None:
                # The handoff ended with a suggestion nobody sent.
                audit += (
                    AssistAuditEntry(
                        chat_id=chat,
                        turn_id=turn_id,
                        event="unused",
                        suggestion_id=before.suggestion.suggestion_id,
                    ).to_fields(),
                )
            note = self.localize(end.context.language, customer_texts.HANDOFF_IDLE_NOTE)
        asked = end.handoff
        move = step(state, HandoffEvent.BOT_ANSWERS if asked is None else HandoffEvent.MODEL_ASKS)
        if state == "waiting":
            updated = updated.with_handoff(move.target, now)
            staff += (
                StaffAction(kind="copy_to_topic", message_id=customer.message_id),
                StaffAction(kind="post_answer"),
            )
            if end.turn_input.kind == "voice":
                # Staff following a waiting chat read what the voice message said.
                staff = (
                    *staff[:-1],
                    transcript_post(end.question.removeprefix(SPEECH_MARK)),
                    staff[-1],
                )
        if state == "bot" and asked is not None:
            updated = updated.with_handoff(move.target, now)
            staff += (
                StaffAction(
                    kind="open",
                    name=customer.name,
                    username=customer.username,
                    text=staff_label("tool", asked.reason),
                    handoff_reason=reason_of("tool", asked.reason),
                ),
            )
            audit += (
                HandoffAuditEntry(
                    chat_id=chat,
                    turn_id=turn_id,
                    event="opened",
                    trigger="tool",
                    reason=asked.reason,
                    handoff_reason=reason_of("tool", asked.reason),
                ).to_fields(),
            )
        if end.proposal is not None and updated.handoff == "waiting":
            # Staff following a waiting chat see what the customer is asked to confirm.
            staff += (
                StaffAction(kind="post", text=f"{CARD_MIRROR}{end.proposal.action.description}"),
            )
        return dataclasses.replace(
            follow,
            session=updated,
            steps=(*follow.steps, StaffRelay(actions=staff)) if staff else follow.steps,
            audit=follow.audit + audit,
            note=note,
            ends_failed_streak=True,
        )
