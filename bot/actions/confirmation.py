"""A press on a confirmation card, resolved by the worker that holds the chat.

The worker checks the press against the session it read with the job: the
action is the chat's pending one, it was not expired when the press *arrived*
(the job's intake time: a crash and restart, or a long turn queued ahead of it
in the chat, never turns an in-time press into a late one), the presser is the
customer it was proposed to. A yes runs the tool's handler with the action id
as the idempotency key, then one commit stores the outcome in the history,
clears the pending action, pops the job and stores the outbox entry (the
card's new text and the outcome message). A crash between the handler and
that commit runs the handler again with the same key: the shop changes once.
Any other press changes nothing.

Whenever the execution may have started and its outcome is not in hand (the
handler raised, a press given up as a dead letter, a verdict of "expired"),
the shop is asked by the idempotency key (``WriteTool.lookup``): what it
applied is told to the customer, the card and the audit (``executed``); it is
never called expired or failed.

A shop's MCP tool takes no idempotency key, so its call is marked as executing
before it is sent (:mod:`bot.actions.runs`): a press taken again after a crash
finds the mark and does not call again (unless the tool is trusted as
idempotent); the customer is told the outcome is being checked, and the action
becomes a dead letter of its own kind for staff. Every run has a deadline.
"""

import asyncio
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from time import perf_counter
from typing import Any

from pydantic import ValidationError

from bot.actions.runs import ActionRuns
from bot.audit.actions import ActionEvent
from bot.customer_texts import (
    ACTION_CHECKING_MESSAGE,
    ACTION_CHECKING_TEXT,
    ACTION_EXPIRED_MESSAGE,
    ACTION_EXPIRED_TEXT,
    ACTION_FAILED_TEXT,
    ACTION_FOREIGN_ANSWER,
    ACTION_STALE_ANSWER,
    Translate,
    with_incident_code,
)
from bot.engine.action_audit import action_fields
from bot.ops.crash_points import ACTION_HANDLED, crash_point
from bot.queue.dead_letters import DeadLetter, DeadLetters
from bot.queue.job_results import JobContext, SessionChange
from bot.queue.jobs import CardEdit, OutboxEntry
from bot.queue.staff_actions import StaffAction
from bot.sessions.models import ConversationSession, session_of
from bot.sessions.pending import OUTCOME_MIRROR, Choice, PendingAction
from tools.mcp.tool import McpCallError, McpTool
from tools.registry import ToolRegistry
from tools.shop_backend import Customer
from tools.write_tools import ActionResult, WriteTool

logger = logging.getLogger(__name__)

DEFAULT_CONFIRM_SECONDS = 600.0
GIVEN_UP = "poison_job"
"""The error code of a confirmed action whose press was given up and that the shop never applied."""

OUTCOME_UNKNOWN = "outcome_unknown"
"""A confirmed action whose call may have reached the shop without its answer reaching us."""
ACTION_DEAD_LETTER = "action_outcome_unknown"
"""The dead letter kind of such an action (``support-audit dead-letters``)."""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionConfirmations:
    """Resolves presses for the Telegram handler and the console, in a job of the chat.

    ``confirm_seconds``: how long a proposal waits for its button (``ACTION_CONFIRM_SECONDS``).
    """

    registry: ToolRegistry
    confirm_seconds: float = DEFAULT_CONFIRM_SECONDS
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    # The executing marks of MCP actions; without them (unit tests) every press is a first.
    runs: ActionRuns | None = None
    # Where an action with an unknown outcome is kept for staff.
    dead_letters: DeadLetters | None = None
    # Post an action with an unknown outcome in the customer's staff topic too.
    alert_staff: bool = False

    def verdict(
        self, session: ConversationSession | None, press: Press, at: datetime | None = None
    ) -> Verdict:
        """The verdict on ``press`` against ``session`` for a press that arrived ``at`` (now)."""
        pending = session.pending_action if session is not None else None
        return judge(pending, press, at or self.clock(), self.confirm_seconds)

    async def settle(  # noqa: PLR0911 - one return per way an action ends
        self,
        pending: PendingAction,
        verdict: Verdict,
        customer: Customer,
        conversation_key: str | None = None,
        *,
        given_up: str | None = None,
    ) -> ActionResult:
        """Run (or decline, or expire) ``pending``: the outcome in the customer's words.

        ``given_up`` (the incident code of a press given up as a dead letter): a
        confirmed action is not run again, only looked up in the shop by its key (a
        shop's MCP tool, which has no key: by its executing mark).
        """
        mcp = self.registry.mcp_tool(pending.tool_name)
        if mcp is not None:
            return await self._settle_mcp(
                mcp, pending, verdict, conversation_key, given_up=given_up
            )
        resolved = self._resolved(pending)
        if isinstance(resolved, ActionResult):
            return resolved
        tool, arguments = resolved
        if verdict is Verdict.DECLINE:
            text = tool.declined(arguments, customer)
            return ActionResult.not_done("declined", text, f"{text}.")
        if verdict is Verdict.CONFIRM and given_up is None:
            return await _run(tool, arguments, customer, pending.action_id)
        # Expired by its arrival, or given up as a dead letter: yet a run may have begun
        # (before the process died; another version's window): only the shop can say.
        done = await _looked_up(tool, arguments, customer, pending.action_id)
        if done is not None:
            return done
        if verdict is Verdict.EXPIRED:
            return ActionResult.not_done("expired", ACTION_EXPIRED_TEXT, ACTION_EXPIRED_MESSAGE)
        return ActionResult.not_done(
            GIVEN_UP, ACTION_FAILED_TEXT, with_incident_code(ACTION_FAILED_TEXT, given_up or "")
        )

    def _resolved(self, pending: PendingAction) -> tuple[WriteTool[Any, Any], Any] | ActionResult:
        """The action's tool and validated arguments, or why it cannot run (nothing changed)."""
        tool = self.registry.write_tool(pending.tool_name)
        if tool is None:
            # A tool of another version (a rolling deploy) or one switched off.
            return ActionResult.not_done("unknown_tool", ACTION_FAILED_TEXT)
        try:
            return tool, tool.arguments_model.model_validate_json(pending.arguments)
        except ValidationError:
            # Another version's arguments model (a rolling deploy); the error quotes the
            # arguments, so only the action is named.
            logger.warning("Action %s: its stored arguments no longer validate", pending.action_id)
            return ActionResult.not_done("invalid_arguments", ACTION_FAILED_TEXT)

    async def press(
        self,
        conversation_key: str,
        job: JobContext,
        press: Press,
        *,
        given_up: bool = False,
        gettext: Translate | None = None,
    ) -> SessionChange | None:
        """Resolve a press; ``None`` when it changes nothing (the job is then just dropped).

        The outcome is returned, not committed: the caller commits the session change
        with the job's pop and the outbox entry (the card's new text, the outcome).

        The verdict is by the time the press arrived (the job's intake time).
        ``given_up``: the press is a dead letter; a confirmed action is settled by
        asking the shop (never run again), and its card and pending action closed.
        ``gettext``: the conversation's catalog; the outcome's texts are told in it.
        """
        session = session_of(job.session_data)
        verdict = self.verdict(session, press, arrived_at(job))
        if (
            session is None
            or session.pending_action is None
            or verdict in (Verdict.STALE, Verdict.FOREIGN)
        ):
            logger.info("Press on action %s: %s, nothing changed", press.action_id, verdict.value)
            return None
        pending = session.pending_action
        customer = Customer(
            user_id=press.presser_id,
            chat_id=press.chat_id,
            photos=pending.photos,
            language=session.language,
        )
        # The customer decided when they pressed, not when a worker got to it.
        decided = arrived_at(job)
        started = perf_counter()
        result = await self.settle(
            pending,
            verdict,
            customer,
            conversation_key,
            given_up=job.job.turn_id if given_up else None,
        )
        crash_point(ACTION_HANDLED)
        if gettext is not None:
            # A text of the catalogs is translated; any other (a tool's own) stays as written.
            result = dataclasses.replace(
                result, card_text=gettext(result.card_text), message=gettext(result.message)
            )
        if result.done:
            # The shop applied it (possibly an earlier run under the same key): confirmed.
            verdict = Verdict.CONFIRM
        now = self.clock()
        staff: tuple[StaffAction, ...] = ()
        if session.handoff != "bot":
            # While a handoff is on, staff see in the topic what the button did.
            staff = (StaffAction(kind="post", text=f"{OUTCOME_MIRROR}{result.card_text}"),)
        if result.error_code == OUTCOME_UNKNOWN:
            await self._dead_letter(pending, job)
            if self.alert_staff:
                # Posted in the customer's topic (opened first if there is none).
                staff = (
                    StaffAction(
                        kind="post",
                        text=f"Проверьте действие {pending.action_id} ({pending.tool_name}): "
                        "магазин мог его выполнить, ответ не получен. Клиенту сказано, что "
                        "итог проверяется.",
                    ),
                )
        entry = OutboxEntry(
            job_id=job.job.job_id,
            turn_id=job.job.turn_id,
            chat_id=job.job.chat_id,
            format="plain",
            text=result.message,
            staff=staff,
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
        return SessionChange(
            change=lambda current: current.with_action_outcome(
                pending.action_id, result.message, now, job.job.turn_id
            ),
            entry=entry,
        )

    async def _dead_letter(self, pending: PendingAction, job: JobContext) -> None:
        """Keep the action for staff (its identifiers and tool only, never the arguments)."""
        if self.dead_letters is None:
            return
        now_ms = int(time.time() * 1000)
        mcp = self.registry.mcp_tool(pending.tool_name)
        await self.dead_letters.record(
            DeadLetter(
                turn_id=job.job.turn_id,
                update_id=job.job.update_id,
                job_id=job.job.job_id,
                attempts=1,
                error=ACTION_DEAD_LETTER,
                given_up_ms=now_ms,
                enqueued_ms=now_ms,
                kind="action",
                action_id=pending.action_id,
                tool_name=pending.tool_name,
                server=mcp.server if mcp is not None else None,
            )
        )

    async def _settle_mcp(
        self,
        tool: McpTool,
        pending: PendingAction,
        verdict: Verdict,
        conversation_key: str | None,
        *,
        given_up: str | None,
    ) -> ActionResult:
        """Run a shop's MCP tool for ``pending``: marked first, called at most once.

        Expired by its arrival, or given up as a dead letter: a call that may have
        begun (its mark is there) is "being checked", never expired or failed.
        """
        try:
            arguments = json.loads(pending.arguments)
        except json.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            return ActionResult.not_done("invalid_arguments", ACTION_FAILED_TEXT)
        if verdict is Verdict.DECLINE:
            text = f"{tool.title}: вы отказались, ничего не сделано"
            return ActionResult.not_done("declined", text, f"{text}.")
        if verdict is Verdict.CONFIRM and given_up is None:
            return await self._call_mcp(tool, pending, arguments, conversation_key)
        if (
            self.runs is not None
            and conversation_key is not None
            and await self.runs.begun(conversation_key, pending.action_id)
        ):
            return _outcome_unknown()
        if verdict is Verdict.EXPIRED:
            return ActionResult.not_done("expired", ACTION_EXPIRED_TEXT, ACTION_EXPIRED_MESSAGE)
        return ActionResult.not_done(
            GIVEN_UP, ACTION_FAILED_TEXT, with_incident_code(ACTION_FAILED_TEXT, given_up or "")
        )

    async def _call_mcp(
        self,
        tool: McpTool,
        pending: PendingAction,
        arguments: dict[str, Any],
        conversation_key: str | None,
    ) -> ActionResult:
        """Mark the action as executing, then call the tool once within its deadline."""
        if (
            self.runs is not None
            and conversation_key is not None
            and not await self.runs.begin(conversation_key, pending.action_id, uuid.uuid4().hex)
            and not tool.idempotent
        ):
            logger.warning(
                "Action %s (%s on %s) was taken again after its call started: not called twice, "
                "its outcome is unknown",
                pending.action_id,
                tool.remote_name,
                tool.server,
            )
            return _outcome_unknown()
        deadline = asyncio.timeout(tool.timeout_seconds)
        try:
            async with deadline:
                outcome = await tool.call(
                    tool.remote_name, arguments, tool.timeout_seconds, tool.idempotent
                )
        except McpCallError as error:
            logger.warning("Action %s (%s): %s", pending.action_id, tool.name, error)
            if not error.reached:
                return ActionResult.not_done("technical_error", ACTION_FAILED_TEXT)
            return _outcome_unknown()
        except Exception:
            # A timeout or a failure after the request left: the shop may have done it.
            logger.exception("Action %s (%s) got no answer", pending.action_id, tool.name)
            return _outcome_unknown()
        card_text, message = tool.outcome_texts(outcome)
        if outcome.is_error:
            return ActionResult.not_done("tool_error", card_text, message)
        return ActionResult(done=True, card_text=card_text, message=message)


def _outcome_unknown() -> ActionResult:
    return ActionResult.not_done(OUTCOME_UNKNOWN, ACTION_CHECKING_TEXT, ACTION_CHECKING_MESSAGE)


def arrived_at(job: JobContext) -> datetime:
    """When the job's update arrived: its intake time (the same on every re-run of it)."""
    return datetime.fromtimestamp(job.job.enqueued_ms / 1000, UTC)


async def _run(
    tool: WriteTool[Any, Any], arguments: Any, customer: Customer, action_id: str
) -> ActionResult:
    deadline = asyncio.timeout(tool.timeout_seconds)
    try:
        # A hung shop must not hold the chat's lease forever: the run has a deadline.
        async with deadline:
            return await tool.handler(arguments, customer, action_id)
    except Exception:
        # The shop is unreachable or broke, perhaps after applying the change: it is
        # asked by the key; only a shop that says "not applied" (or cannot be asked)
        # makes it a failure, and a repeat of the same key would not change it twice.
        logger.exception("Action %s (%s) failed", action_id, tool.name)
        done = await _looked_up(tool, arguments, customer, action_id)
        return done or ActionResult.not_done("technical_error", ACTION_FAILED_TEXT)


async def _looked_up(
    tool: WriteTool[Any, Any], arguments: Any, customer: Customer, action_id: str
) -> ActionResult | None:
    """What the shop applied under the action's key; ``None`` when nothing (or unreachable)."""
    try:
        return await tool.lookup(arguments, customer, action_id)
    except Exception:  # the shop's own failure: the caller's verdict stands
        logger.warning("Action %s (%s): the shop could not be asked", action_id, tool.name)
        return None


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
