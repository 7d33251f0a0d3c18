"""What one tool execution left behind: the record the audit and the application see."""

from dataclasses import dataclass

from turn.outcomes import ToolStatus


@dataclass(frozen=True, slots=True)
class ToolExecutionRecord:
    """What the executor measured about one execution: never the arguments, never message text.

    The seed design's ``ToolAuditRecord`` (``tools.execution.ToolAuditRecord`` is
    this class). It lives on the lowest floor because a failed loop carries it
    (:class:`turn.errors.ToolLoopExecutionError`). The audit stream's
    :class:`~bot.audit.schema.ToolAuditEntry` is built from it (with the chat,
    turn and model step it belongs to).
    """

    call_id: str
    tool_name: str
    started_at: str
    duration_seconds: float
    status: ToolStatus
    error_code: str | None
    category: str | None = None
    # A search-like tool's result count and first item's id (RegisteredTool.result_summary).
    result_count: int | None = None
    top_result_id: str | None = None
    # The MCP server a shop's tool belongs to (None for a built-in tool).
    server: str | None = None
