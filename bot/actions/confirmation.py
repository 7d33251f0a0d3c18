"""A press on a confirmation card, resolved by the worker that holds the chat.

The worker checks the press against the session it read with the job: the
action is the chat's pending one, it is not expired, the presser is the
customer it was proposed to. A yes runs the tool's handler with the action id
as the idempotency key, then one commit stores the outcome in the history,
clears the pending action, pops the job and stores the outbox entry (the
card's new text and the outcome message). A crash between the handler and
that commit runs the handler again with the same key: the shop changes once.
Any other press changes nothing.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from time import perf_counter
from typing import Any, Protocol

from pydantic import ValidationError

from bot.actions.audit import action_fields
from bot.actions.pending import OUTCOME_MIRROR, Choice, PendingAction
from bot.audit.actions import ActionEvent
from bot.customer_texts import (
    ACTION_EXPIRED_MESSAGE,
    ACTION_EXPIRED_TEXT,
    ACTION_FAILED_TEXT,
    ACTION_FOREIGN_ANSWER,
    ACTION_STALE_ANSWER,
)
from bot.handoff.staff_actions import StaffAction
from bot.ops.crash_points import ACTION_HANDLED, crash_point
from bot.queue.job_results import JobContext, JobDone
from bot.queue.jobs import CardEdit, OutboxEntry
from bot.sessions.models import ConversationSession, session_of
from tools.registry import ToolRegistry
from tools.shop_backend import Customer
from tools.write_tools import ActionResult, WriteTool

logger = logging.getLogger(__name__)

DEFAULT_CONFIRM_SECONDS = 600.0


class Verdict(StrEnum):
    """What a press means for the chat's pending action."""

    CONFIRM = "confirm"
    DECLINE = "decline"
    EXPIRED = "expired"
    STALE = "stale"  # no such pending action: done, declined, superseded, or forged
    FOREIGN = "foreign"  # someone else pressed the customer's card


SHORT_ANSWERS = {
    Verdict.STALE: ACTION_STALE_ANSWER,
    Verdict.EXPIRED: ACTION_EXPIRED_TEXT,
    Verdict.FOREIGN: ACTION_FOREIGN_ANSWER,
}
"""What the callback's own answer says when the press changes nothing (or only expires)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Press:
    """A button press as the worker knows it: what, by whom, on which card.

    The console's: no presser id, its conversation key for the chat, its one card.
    """

    action_id: str
    choice: Choice
    presser_id: int | None
    chat_id: int | str
    card_message_id: int | None


def judge(
    pending: PendingAction | None,
    press: Press,
    now: datetime,
    confirm_seconds: float,
) -> Verdict:
    """The verdict on ``press`` given the chat's pending action (pure: intake uses it too)."""
    if pending is None or pending.action_id != press.action_id:
        return Verdict.STALE
    if pending.user_id is not None and pending.user_id != press.presser_id:
        return Verdict.FOREIGN
    if (now - pending.proposed_at).total_seconds() > confirm_seconds:
        return Verdict.EXPIRED
    return Verdict.CONFIRM if press.choice == "yes" else Verdict.DECLINE


class SessionCommitter(Protocol):
    """The chat service's commit of a session change outside a model turn."""

    async def commit_without_turn(
        self,
        conversation_key: str,
        held: JobContext,
        change: Callable[[ConversationSession], ConversationSession],
        entry: OutboxEntry,
    ) -> JobDone:
        """Save ``change`` of the held session, pop the job with ``entry`` (one script)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionConfirmations:
    """Resolves presses for the Telegram handler and the console, in a job of the chat.

    ``confirm_seconds``: how long a proposal waits for its button (``ACTION_CONFIRM_SECONDS``).
    """

    registry: ToolRegistry
    chat: SessionCommitter
    confirm_seconds: float = DEFAULT_CONFIRM_SECONDS
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def verdict(self, session: ConversationSession | None, press: Press) -> Verdict:
        """The verdict on ``press`` against ``session`` now."""
        pending = session.pending_action if session is not None else None
        return judge(pending, press, self.clock(), self.confirm_seconds)

    async def settle(
        self, pending: PendingAction, verdict: Verdict, customer: Customer
    ) -> ActionResult:
        """Run (or decline, or expire) ``pending``: the outcome in the customer's words."""
        tool = self.registry.write_tool(pending.tool_name)
        if tool is None:
            # A tool of another version (a rolling deploy) or one switched off.
            return ActionResult.not_done("unknown_tool", ACTION_FAILED_TEXT)
        try:
            arguments = tool.arguments_model.model_validate_json(pending.arguments)
        except ValidationError:
            # Another version's arguments model (a rolling deploy); the error quotes the
            # arguments, so only the action is named.
            logger.warning("Action %s: its stored arguments no longer validate", pending.action_id)
            return ActionResult.not_done("invalid_arguments", ACTION_FAILED_TEXT)
        if verdict is Verdict.EXPIRED:
            return ActionResult.not_done("expired", ACTION_EXPIRED_TEXT, ACTION_EXPIRED_MESSAGE)
        if verdict is Verdict.DECLINE:
            text = tool.declined(arguments)
            return ActionResult.not_done("declined", text, f"{text}.")
        return await _run(tool, arguments, customer, pending.action_id)

    async def press(self, conversation_key: str, job: JobContext, press: Press) -> JobDone | None:
        """Resolve a press; ``None`` when it changes nothing (the job is then just dropped)."""
        session = session_of(job.session_data)
        verdict = self.verdict(session, press)
        if (
            session is None
            or session.pending_action is None
            or verdict in (Verdict.STALE, Verdict.FOREIGN)
        ):
            logger.info("Press on action %s: %s, nothing changed", press.action_id, verdict.value)
            return None
        pending = session.pending_action
        customer = Customer(user_id=press.presser_id, chat_id=press.chat_id)
        decided = self.clock()
        started = perf_counter()
        result = await self.settle(pending, verdict, customer)
        crash_point(ACTION_HANDLED)
        now = self.clock()
        entry = OutboxEntry(
            job_id=job.job.job_id,
            turn_id=job.job.turn_id,
            chat_id=job.job.chat_id,
            format="plain",
            text=result.message,
            # While a handoff is on, staff see in the topic what the button did.
            staff=(StaffAction(kind="post", text=f"{OUTCOME_MIRROR}{result.card_text}"),)
            if session.handoff != "bot"
            else (),
            audit=_press_audit(
                pending,
                verdict,
                result=result,
                chat=str(press.chat_id),
                turn=job.job.turn_id,
                decided=decided,
                seconds=perf_counter() - started,
            ),
            card_edit=(
                CardEdit(message_id=press.card_message_id, text=result.card_text)
                if press.card_message_id is not None
                else None
            ),
        )
        return await self.chat.commit_without_turn(
            conversation_key,
            job,
            lambda current: current.with_action_outcome(
                pending.action_id, result.message, now, job.job.turn_id
            ),
            entry,
        )


async def _run(
    tool: WriteTool[Any, Any], arguments: Any, customer: Customer, action_id: str
) -> ActionResult:
    try:
        return await tool.handler(arguments, customer, action_id)
    except Exception:
        # The shop is unreachable or broke: nothing is known to have changed; the
        # customer is told so, and a repeat of the same key would not change it twice.
        logger.exception("Action %s (%s) failed", action_id, tool.name)
        return ActionResult.not_done("technical_error", ACTION_FAILED_TEXT)


def _press_audit(
    pending: PendingAction,
    verdict: Verdict,
    *,
    result: ActionResult,
    chat: str,
    turn: str,
    decided: datetime,
    seconds: float,
) -> tuple[dict[str, str], ...]:
    """The press's action steps: the decision, and for a yes how the run ended."""
    decision: ActionEvent = (
        "confirmed"
        if verdict is Verdict.CONFIRM
        else "declined"
        if verdict is Verdict.DECLINE
        else "expired"
    )
    steps = [action_fields(pending, decision, chat_id=chat, turn_id=turn, now=decided)]
    if verdict is Verdict.CONFIRM:
        steps.append(
            action_fields(
                pending,
                "executed" if result.done else "failed",
                chat_id=chat,
                turn_id=turn,
                error_code=result.error_code or "",
                duration_ms=seconds * 1000,
            )
        )
    return tuple(steps)
