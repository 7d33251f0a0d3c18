"""The one adapter between staff assist and the tool path: which tools, run how.

Staff assist uses the tool path only through its public functions: the
registry's names and API schemas, :meth:`~tools.execution.ToolExecutor.execute`
for reads (built-in and a shop's MCP reads, with the customer's bound identity
from the turn context), and :func:`~bot.engine.proposals.propose` /
:func:`~bot.engine.proposals.propose_mcp` for writes, which validate and check
and change nothing. Kept in one small module so the tool path can be re-pointed
here alone.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.engine.proposals import propose, propose_mcp
from bot.sessions.pending import PendingAction
from tools.execution import ToolExecutionError, ToolExecutor
from tools.registry import ToolNotRegisteredError, ToolRegistry
from turn import ToolCall, TurnContext


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposed:
    """A write validated and checked: the pending action it would be (nothing ran)."""

    action: PendingAction


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """A call the tool path refused: the tool message for the model and the error code."""

    content: str
    code: str


@dataclass(frozen=True, kw_only=True)
class AssistTools:
    """The tools a suggestion may use: every read and write but those that hand off."""

    registry: ToolRegistry
    executor: ToolExecutor

    def needs_card(self, name: str) -> bool:
        """Whether ``name`` changes something (a write, or a shop tool that needs a press)."""
        mcp = self.registry.mcp_tool(name)
        return self.registry.write_tool(name) is not None or (mcp is not None and mcp.confirm)

    def _offered(self, name: str) -> bool:
        if self.registry.write_tool(name) is not None or self.registry.mcp_tool(name) is not None:
            return True
        try:
            # A tool that ends the turn (request_human_agent) means nothing to a person.
            return not self.registry.get(name).hands_off
        except ToolNotRegisteredError:
            return False

    def schemas(self) -> Sequence[dict[str, Any]]:
        """The API schemas of the tools offered to the drafting model."""
        return [
            schema
            for schema in self.registry.api_schemas()
            if self._offered(str(schema.get("function", {}).get("name", "")))
        ]

    async def read(self, call: ToolCall, context: TurnContext) -> str:
        """Run a read for the model; any refusal or failure is the tool message it reads."""
        try:
            return (await self.executor.execute(call, context)).content
        except ToolExecutionError as error:
            return _error_content(error.audit.error_code or "failed")

    async def propose(self, call: ToolCall, context: TurnContext) -> Proposed | Refused:
        """Validate and check a write: what it would be, or why it would not (nothing runs)."""
        try:
            mcp = self.registry.mcp_tool(call.name)
            write = self.registry.write_tool(call.name)
            if mcp is not None and mcp.confirm:
                proposal = await propose_mcp(mcp, call, context)
            elif write is not None:
                proposal = await propose(write, call, context)
            else:
                return Refused(content=_error_content("not_a_write"), code="not_a_write")
        except ToolExecutionError as error:
            code = error.audit.error_code or "failed"
            return Refused(content=_error_content(code), code=code)
        if proposal.action is None:
            return Refused(content=proposal.content, code=proposal.record.error_code or "refused")
        return Proposed(action=proposal.action)


def _error_content(code: str) -> str:
    return json.dumps({"ok": False, "error": {"code": code, "message": code}})
