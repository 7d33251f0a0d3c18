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

from bot.engine.proposals import propose
from bot.sessions.pending import PendingAction
from tools.execution import ToolExecutionError, ToolExecutor
from tools.registry import ToolRegistry
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
        """Whether ``name`` needs the customer's press (its approval is a card)."""
        tool = self.registry.find(name)
        return tool is not None and tool.approval == "card"

    def _offered(self, name: str) -> bool:
        tool = self.registry.find(name)
        # A tool that ends the turn (request_human_agent) means nothing to a person.
        return tool is not None and not tool.hands_off

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
        tool = self.registry.find(call.name)
        if tool is None or tool.approval != "card":
            return Refused(content=_error_content("not_a_write"), code="not_a_write")
        try:
            proposal = await propose(tool, call, context)
        except ToolExecutionError as error:
            code = error.audit.error_code or "failed"
            return Refused(content=_error_content(code), code=code)
        if proposal.action is None:
            return Refused(content=proposal.content, code=proposal.record.error_code or "refused")
        return Proposed(action=proposal.action)


def _error_content(code: str) -> str:
    return json.dumps({"ok": False, "error": {"code": code, "message": code}})
