"""request_human_agent: the model asks for a support person to take the conversation over.

The tool does no I/O: it is registered with ``hands_off``, so the tool loop
ends the turn with a :class:`turn.outcomes.HandoffRequest`; the chat service
then puts the conversation in ``waiting`` and has the worker open the staff
topic after the turn's commit. The reason is a
closed category (never free text), so it may go into the audit.
"""

from typing import Literal

from pydantic import BaseModel

from tools.registry import RegisteredTool, ToolArguments

REQUEST_HUMAN_AGENT_TOOL_NAME = "request_human_agent"

HandoffReason = Literal[
    "customer_asked", "complaint", "refund_dispute", "order_problem", "bot_cannot_help", "other"
]


class RequestHumanAgentArguments(ToolArguments):
    """Why a person is needed, as a category."""

    reason: HandoffReason


class HumanAgentRequested(BaseModel):
    """The marker the chat service looks for; tells the model what the customer is told."""

    requested: bool
    reason: HandoffReason
    note: str


def build_request_human_agent_tool() -> RegisteredTool[
    RequestHumanAgentArguments, HumanAgentRequested
]:
    """The handoff tool (register it only when handoff is on)."""

    def request_human_agent(arguments: RequestHumanAgentArguments) -> HumanAgentRequested:
        return HumanAgentRequested(
            requested=True,
            reason=arguments.reason,
            note="Сотрудник поддержки подключится к этому чату; скажи клиенту, что его позвали.",
        )

    return RegisteredTool(
        name=REQUEST_HUMAN_AGENT_TOOL_NAME,
        description=(
            "Зовёт сотрудника поддержки в этот чат. Используй, когда клиент просит человека, "
            "жалуется, спорит о возврате или ты не можешь помочь. reason: категория причины."
        ),
        arguments_model=RequestHumanAgentArguments,
        handler=request_human_agent,
        blocking=False,
        category=lambda result: result.reason,
        hands_off=True,
    )
