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

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from time import perf_counter
from typing import Any

from bot.actions.runs import ActionRuns
from bot.audit.actions import ActionEvent
from bot.customer_texts import (
    ACTION_CHECKING_MESSAGE,
    ACTION_CHECKING_TEXT,
    ACTION_DECLINED_TEXT,
    ACTION_EXPIRED_MESSAGE,
    ACTION_EXPIRED_TEXT,
    ACTION_FAILED_TEXT,
    ACTION_FOREIGN_ANSWER,
    ACTION_STALE_ANSWER,
    ACTION_UNAVAILABLE_MESSAGE,
    ACTION_UNAVAILABLE_TEXT,
    Translate,
    with_incident_code,
)
from bot.engine.action_audit import action_fields
from bot.ops.crash_points import ACTION_HANDLED, crash_point
from bot.queue.dead_letters import DeadLetter, DeadLetters
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import EditCard, SendText, StaffRelay
from bot.queue.job_results import JobContext, SessionChange
from bot.queue.staff_actions import StaffAction
from bot.sessions.models import ConversationSession
from bot.sessions.pending import OUTCOME_MIRROR, Choice, PendingAction
from bot.staff_texts import ACTION_CHECK_NOTE
from tools.registry import Tool, ToolRegistry
from tools.shop_backend import Customer
from tools.write_tools import OUTCOME_UNKNOWN, ActionResult, card_value

logger = logging.getLogger(__name__)

DEFAULT_CARD_WINDOW_SECONDS = 600.0
GIVEN_UP = "poison_job"
"""The error code of a confirmed action whose press was given up and that the shop never applied."""

DEFAULT_TOOL_WAIT_SECONDS = 30.0
"""How long a confirmed press waits for its tool's server to list it again (then: not done)."""
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
    card_window_seconds: float,
) -> Verdict:
    """The verdict on ``press`` given the chat's pending action (pure: intake uses it too)."""
    if pending is None or pending.action_id != press.action_id:
        return Verdict.STALE
    if pending.user_id is not None and pending.user_id != press.presser_id:
        return Verdict.FOREIGN
    if (now - pending.proposed_at).total_seconds() > card_window_seconds:
        return Verdict.EXPIRED
    return Verdict.CONFIRM if press.choice == "yes" else Verdict.DECLINE


@dataclass(frozen=True, slots=True, kw_only=True)
class CardPresses:
    """Resolves presses for the Telegram handler and the console, in a job of the chat.

    ``card_window_seconds``: how long a proposal waits for its button (``ACTION_CONFIRM_SECONDS``).
    """

    registry: ToolRegistry
    card_window_seconds: float = DEFAULT_CARD_WINDOW_SECONDS
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    # The executing marks of MCP actions; without them (unit tests) every press is a first.
    runs: ActionRuns | None = None
    # Where an action with an unknown outcome is kept for staff.
    dead_letters: DeadLetters | None = None
    # Post an action with an unknown outcome in the customer's staff topic too.
    alert_staff: bool = False
    # How long a confirmed press waits for a server that has not listed its tool (yet).
    tool_wait_seconds: float = DEFAULT_TOOL_WAIT_SECONDS
    # Staff texts (the default language's catalog), as staff assist shows its own.
    staff_texts: Translate = lambda message: message

    def verdict(
        self, session: ConversationSession | None, press: Press, at: datetime | None = None
    ) -> Verdict:
        """The verdict on ``press`` against ``session`` for a press that arrived ``at`` (now)."""
        pending = session.pending_action if session is not None else None
        return judge(pending, press, at or self.clock(), self.card_window_seconds)

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

        The one settle path of every tool with a card. An executing mark means a run
        may have reached the shop: its outcome is the tool's to tell
        (:meth:`~tools.registry.Tool.outcome_of`), and unknown when it cannot, whether
        or not the tool is listed now. A confirmed action whose tool is not listed
        now and never started waits up to ``tool_wait_seconds`` for its server, then
        is told truthfully as not done. ``given_up`` (the incident code of a press
        given up as a dead letter): a confirmed action is not run again, only settled
        by what the tool can tell of an earlier run.
        """
        name = pending.tool_name
        if verdict is Verdict.DECLINE:
            tool = self.registry.find(name)
            arguments = _decoded(tool, pending) if tool is not None else None
            if tool is None or arguments is None:
                return ActionResult.not_done("declined", ACTION_DECLINED_TEXT)
            text = tool.declined(arguments, customer)
            return ActionResult.not_done("declined", text, f"{text}.")
        marked = await self._marked(conversation_key, pending.action_id)
        if verdict is Verdict.CONFIRM and given_up is None:
            tool = self.registry.find(name)
            if tool is None and marked:
                # A run started before a crash; its server is not listed (yet): unknown.
                return _worded(ActionResult.unknown())
            if tool is None:
                tool = await self.registry.listed(name, self.tool_wait_seconds)
            if tool is None:
                logger.warning(
                    "Action %s: its tool %s is not offered (a server down, another version): "
                    "not run",
                    pending.action_id,
                    name,
                )
                return ActionResult.not_done(
                    "tool_unavailable", ACTION_UNAVAILABLE_TEXT, ACTION_UNAVAILABLE_MESSAGE
                )
            arguments = _decoded(tool, pending)
            if arguments is None:
                return ActionResult.not_done("invalid_arguments", ACTION_FAILED_TEXT)
            if not await self._begin(conversation_key, pending.action_id) and not tool.rerun_safe:
                logger.warning(
                    "Action %s (%s) was taken again after its run started: not run twice, "
                    "its outcome is unknown",
                    pending.action_id,
                    name,
                )
                return _worded(ActionResult.unknown())
            return _worded(await tool.run(arguments, customer, pending.action_id))
        # Expired by its arrival, or given up as a dead letter: yet a run may have begun
        # (before the process died; another version's window): only the tool can say.
        tool = self.registry.find(name)
        arguments = _decoded(tool, pending) if tool is not None else None
        if tool is not None and arguments is not None:
            done = await tool.outcome_of(
                arguments, customer, pending.action_id, marked=bool(marked)
            )
        else:
            done = ActionResult.unknown() if marked else None
        if done is not None:
            return _worded(done)
        if verdict is Verdict.EXPIRED:
            return ActionResult.not_done("expired", ACTION_EXPIRED_TEXT, ACTION_EXPIRED_MESSAGE)
        return ActionResult.not_done(
            GIVEN_UP, ACTION_FAILED_TEXT, with_incident_code(ACTION_FAILED_TEXT, given_up or "")
        )

    async def _marked(self, conversation_key: str | None, action_id: str) -> bool:
        """Whether a run of ``action_id`` may have started (its executing mark is there)."""
        if self.runs is None or conversation_key is None:
            return False
        return await self.runs.begun(conversation_key, action_id)

    async def _begin(self, conversation_key: str | None, action_id: str) -> bool:
        """Mark ``action_id`` as executing; ``False`` when an earlier attempt marked it."""
        if self.runs is None or conversation_key is None:
            return True
        return await self.runs.begin(conversation_key, action_id, uuid.uuid4().hex)

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
        session = job.session
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
                        text=self.staff_texts(ACTION_CHECK_NOTE).format(
                            action_id=pending.action_id,
                            tool=pending.tool_name,
                            # The card as the customer saw it, on one line and bounded.
                            description=card_value(pending.description, max_chars=600),
                        ),
                    ),
                )
        reply = Reply.of(
            EditCard(message_id=press.card_message_id, text=result.card_text)
            if press.card_message_id is not None
            else None,
            SendText(text=result.message),
            StaffRelay(actions=staff) if staff else None,
            audit=_press_audit(
                pending,
                verdict,
                result=result,
                chat=str(press.chat_id),
                turn=job.job.turn_id,
                decided=decided,
                seconds=perf_counter() - started,
            ),
        )
        return SessionChange(
            change=lambda current: current.with_action_outcome(
                pending.action_id, result.message, now, job.job.turn_id
            ),
            reply=reply,
            tool_result=result.for_model,
            tool_name=pending.tool_name,
            action_id=pending.action_id,
        )

    async def _dead_letter(self, pending: PendingAction, job: JobContext) -> None:
        """Keep the action for staff (its identifiers and tool only, never the arguments)."""
        if self.dead_letters is None:
            return
        now_ms = int(time.time() * 1000)
        tool = self.registry.find(pending.tool_name)
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
                server=pending.server or (tool.server if tool is not None else None),
            )
        )


def _worded(result: ActionResult) -> ActionResult:
    """``result`` with the application's texts where the tool left them to it."""
    if result.card_text:
        return result
    if result.error_code == OUTCOME_UNKNOWN:
        return ActionResult.not_done(OUTCOME_UNKNOWN, ACTION_CHECKING_TEXT, ACTION_CHECKING_MESSAGE)
    return ActionResult.not_done(result.error_code or "technical_error", ACTION_FAILED_TEXT)


def _decoded(tool: Tool, pending: PendingAction) -> Any | None:
    """The stored arguments as the tool takes them; ``None`` when they no longer fit."""
    try:
        return tool.decode(pending.arguments)
    except ValueError:
        # Another version's arguments (a rolling deploy); the error may quote them, so
        # only the action is named.
        logger.warning("Action %s: its stored arguments no longer validate", pending.action_id)
        return None


def arrived_at(job: JobContext) -> datetime:
    """When the job's update arrived: its intake time (the same on every re-run of it)."""
    return datetime.fromtimestamp(job.job.enqueued_ms / 1000, UTC)


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
