"""A write tool called by the model: validated, checked, and proposed; nothing is changed.

The model gets ``{"ok": true, "data": {"status": "awaiting_confirmation",
"action_id": ...}}``; the turn carries the pending action, which the chat
service stores with the turn and shows as a card after the reply.
"""

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from bot.sessions.pending import PendingAction, new_action_id
from tools.execution import (
    CallTimer,
    ToolExecutionRecord,
    business_error_content,
    mcp_arguments,
    technical_error,
    timeout_error,
    tool_content,
    validated_arguments,
)
from tools.mcp.tool import McpTool
from tools.shop_backend import Customer
from tools.write_tools import WriteTool
from turn import ToolBusinessError, ToolCall, ToolStatus, TurnContext

AWAITING_CONFIRMATION = "awaiting_confirmation"
ONE_ACTION_AT_A_TIME = "one_action_at_a_time"
"""The code of a second write proposed in one turn: the model is told no, and why."""
PROPOSED_CATEGORY = "proposed"
"""The tool audit entry's category of a successful proposal (the action's own entry follows)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """The tool message for the model, the execution's audit record, the action if proposed."""

    content: str
    record: ToolExecutionRecord
    action: PendingAction | None


async def propose(tool: WriteTool[Any, Any], tool_call: ToolCall, context: TurnContext) -> Proposal:
    """Validate and check one write call; raise the executor's errors for the loop to handle.

    Invalid arguments raise :class:`~tools.execution.ToolArgumentsError` (the
    model may correct itself); a timeout or a crash of the check raises
    :class:`~tools.execution.ToolTimeoutError` / ``ToolTechnicalError``.
    """
    timer = CallTimer(tool_call)
    record = timer.record
    arguments = validated_arguments(tool.arguments_model, tool.name, tool_call, timer)
    deadline = asyncio.timeout(tool.timeout_seconds)
    try:
        async with deadline:
            state = await tool.check(arguments, Customer.of(context))
        description = tool.describe(arguments, state)
    except ToolBusinessError as error:
        return Proposal(
            content=business_error_content(error),
            record=record(ToolStatus.BUSINESS_ERROR, error.code),
            action=None,
        )
    except Exception as error:
        # Only the deadline's own timeout is one; a TimeoutError the check raised is a crash.
        if isinstance(error, TimeoutError) and deadline.expired():
            raise timeout_error(tool.name, tool.timeout_seconds, timer) from error
        raise technical_error(tool.name, timer) from error
    action = PendingAction(
        action_id=new_action_id(),
        tool_name=tool.name,
        arguments=arguments.model_dump_json(),
        description=description,
        proposed_at=timer.started_at,
        turn_id=context.turn_id,
        user_id=context.user_id,
        photos=context.photos,
    )
    return _proposed(action, timer)


async def propose_mcp(tool: McpTool, tool_call: ToolCall, context: TurnContext) -> Proposal:
    """Validate one call of a shop's MCP tool that needs the button; nothing is called yet.

    The arguments are checked against the server's schema (a failure raises
    :class:`~tools.execution.ToolArgumentsError`), the bound ones filled from the
    turn's identity; the card is the application's rendering of them.
    """
    timer = CallTimer(tool_call, server=tool.server)
    arguments = mcp_arguments(tool, tool_call, timer)
    try:
        bound = tool.bind(arguments, context)
    except ToolBusinessError as error:
        return Proposal(
            content=business_error_content(error),
            record=timer.record(ToolStatus.BUSINESS_ERROR, error.code),
            action=None,
        )
    action = PendingAction(
        action_id=new_action_id(),
        tool_name=tool.name,
        arguments=json.dumps(bound, ensure_ascii=False),
        description=tool.card_text(bound),
        proposed_at=timer.started_at,
        turn_id=context.turn_id,
        user_id=context.user_id,
    )
    return _proposed(action, timer)


def _proposed(action: PendingAction, timer: CallTimer) -> Proposal:
    return Proposal(
        content=tool_content(
            {
                "ok": True,
                "data": {"status": AWAITING_CONFIRMATION, "action_id": action.action_id},
            }
        ),
        record=timer.record(ToolStatus.SUCCESS, None, PROPOSED_CATEGORY),
        action=action,
    )


def refuse_second(tool_name: str, tool_call: ToolCall, *, server: str | None = None) -> Proposal:
    """A second write in a turn that proposed one already: the tool's "no", nothing proposed.

    The customer sees one card per turn, so the model must not tell them that two
    actions await their buttons; it may propose the other one in a later turn. The
    same for a shop's MCP tool that needs the button (``server`` names its server).
    """
    timer = CallTimer(tool_call, server=server)
    error = ToolBusinessError(
        f"{tool_name} не предложено: в этом ходе клиенту уже предложено другое действие. "
        "Одновременно ждёт подтверждения только одно действие; предложи это после того, "
        "как клиент решит по первому.",
        code=ONE_ACTION_AT_A_TIME,
    )
    return Proposal(
        content=business_error_content(error),
        record=timer.record(ToolStatus.BUSINESS_ERROR, error.code),
        action=None,
    )
