"""A tool that needs approval, called by the model: validated, checked, proposed; nothing changes.

The model gets ``{"ok": true, "data": {"status": "awaiting_confirmation",
"action_id": ...}}``; the turn carries the pending action, which the chat
service stores with the turn and shows as a card after the reply.
"""

from dataclasses import dataclass

from bot.sessions.pending import PendingAction, new_action_id
from tools.execution import (
    CallTimer,
    ToolExecutionRecord,
    ToolNotAllowedError,
    business_error_content,
    tool_content,
)
from tools.registry import Tool, ToolRegistry
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


async def propose(tool: Tool, tool_call: ToolCall, context: TurnContext) -> Proposal:
    """Validate and check one call of a tool that needs approval; nothing is changed yet.

    The one proposal path of every tool with a card (the application's write tools, a
    shop's MCP tools): invalid arguments raise
    :class:`~tools.execution.ToolArgumentsError` (the model may correct itself); a
    timeout or a crash of the check raises :class:`~tools.execution.ToolTimeoutError`
    / ``ToolTechnicalError``; a rule's "no" is the tool's answer to the model.
    """
    timer = CallTimer(tool_call, server=tool.server)
    try:
        prepared = await tool.prepare(tool_call, context, timer)
    except ToolBusinessError as error:
        return Proposal(
            content=business_error_content(error),
            record=timer.record(ToolStatus.BUSINESS_ERROR, error.code),
            action=None,
        )
    action = PendingAction(
        action_id=new_action_id(),
        tool_name=tool.name,
        arguments=prepared.arguments,
        description=prepared.description,
        proposed_at=timer.started_at,
        turn_id=context.turn_id,
        user_id=context.user_id,
        photos=context.photos,
        server=tool.server,
    )
    return _proposed(action, timer)


async def propose_call(
    registry: ToolRegistry, tool_call: ToolCall, context: TurnContext
) -> Proposal:
    """Propose ``tool_call`` for ``context`` as a card, whatever its tool (staff assist, eval).

    A name the registry does not offer, or a tool that needs no approval, raises
    :class:`~tools.execution.ToolNotAllowedError`.
    """
    tool = registry.find(tool_call.name)
    if tool is None or tool.approval != "card":
        raise ToolNotAllowedError(
            "no tool with a card under this name",
            CallTimer(tool_call).record(ToolStatus.REJECTED, "unknown_tool"),
        )
    return await propose(tool, tool_call, context)


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
