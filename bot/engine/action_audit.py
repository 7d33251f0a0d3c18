"""The audit entries of an action's steps (``type=action``): ids, names, codes, times only."""

from datetime import datetime

from bot.audit.actions import ActionAuditEntry, ActionEvent
from bot.sessions.pending import PendingAction


def action_fields(
    action: PendingAction,
    event: ActionEvent,
    *,
    chat_id: str,
    turn_id: str,
    now: datetime | None = None,
    error_code: str = "",
    duration_ms: float | None = None,
) -> dict[str, str]:
    """The stream fields of ``event`` of ``action``; with ``now``, the time it took to decide."""
    decided = (now - action.proposed_at).total_seconds() * 1000 if now is not None else None
    return ActionAuditEntry(
        chat_id=chat_id,
        turn_id=turn_id,
        event=event,
        action_id=action.action_id,
        tool_name=action.tool_name,
        error_code=error_code,
        decide_ms=decided,
        duration_ms=duration_ms,
    ).to_fields()


def proposal_fields(
    before: PendingAction | None,
    proposal: PendingAction | None,
    *,
    chat_id: str,
    turn_id: str,
    now: datetime,
) -> tuple[dict[str, str], ...]:
    """A turn's action steps: the new proposal, and the pending one it superseded."""
    if proposal is None:
        return ()
    fields: tuple[dict[str, str], ...] = ()
    if before is not None:
        fields += (action_fields(before, "superseded", chat_id=chat_id, turn_id=turn_id, now=now),)
    return (*fields, action_fields(proposal, "proposed", chat_id=chat_id, turn_id=turn_id))
