"""Audit entries as written to the stream: flat string fields only."""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tools.execution import ToolAuditRecord
from turn import TurnOutcome, Usage

# A registered tool's name always fits this (tools.registry); a name the model made
# up that does not fit may be any text at all, even the customer's, so it is not written.
_TOOL_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
INVALID_TOOL_NAME = "(invalid name)"


def safe_tool_name(name: str) -> str:
    """``name`` if it is shaped like a tool name, else ``(invalid name)``."""
    return name if _TOOL_NAME.fullmatch(name) is not None else INVALID_TOOL_NAME


def _optional(value: int | str | None) -> str:
    return "" if value is None else str(value)


@dataclass(frozen=True, slots=True)
class ToolAuditEntry:
    """One tool execution of one turn (``step`` is the model call that asked for it)."""

    record: ToolAuditRecord
    chat_id: str
    turn_id: str
    step: int

    def to_fields(self) -> dict[str, str]:
        """The stream entry's fields."""
        return {
            "type": "tool",
            "call_id": self.record.call_id,
            "tool_name": safe_tool_name(self.record.tool_name),
            "status": str(self.record.status),
            "error_code": self.record.error_code or "",
            "started_at": self.record.started_at,
            "duration_ms": f"{self.record.duration_seconds * 1000:.3f}",
            "chat_id": self.chat_id,
            "turn_id": self.turn_id,
            "step": str(self.step),
        }


@dataclass(frozen=True, slots=True)
class TurnAuditEntry:
    """How one turn ended (``outcome`` is ``answered`` or the failure kind)."""

    chat_id: str
    turn_id: str
    outcome: TurnOutcome
    model: str
    model_steps: int
    tool_calls: int
    tool_names: tuple[str, ...]
    usage: Usage
    latency_ms: float
    prompt_id: str
    prompt_version: str
    queue_ms: float | None = None

    def to_fields(self) -> dict[str, str]:
        """The stream entry's fields."""
        return {
            "type": "turn",
            "chat_id": self.chat_id,
            "turn_id": self.turn_id,
            "outcome": str(self.outcome),
            "model": self.model,
            "model_steps": str(self.model_steps),
            "tool_calls": str(self.tool_calls),
            "tool_names": ",".join(safe_tool_name(name) for name in self.tool_names),
            "prompt_tokens": _optional(self.usage.prompt_tokens),
            "completion_tokens": _optional(self.usage.completion_tokens),
            "total_tokens": _optional(self.usage.total_tokens),
            "latency_ms": f"{self.latency_ms:.3f}",
            "queue_ms": "" if self.queue_ms is None else f"{self.queue_ms:.3f}",
            "prompt_id": self.prompt_id,
            "prompt_version": self.prompt_version,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffAuditEntry:
    """A step of a human handoff: ``opened``, ``first_reply`` or ``closed``; never text.

    ``trigger`` and ``reason`` (opened) are closed categories; ``wait_ms`` is the
    customer's wait for the first staff reply; ``closed_by`` is ``staff`` or
    ``idle`` and ``duration_ms`` the handoff's length.
    """

    chat_id: str
    turn_id: str
    event: str
    trigger: str = ""
    reason: str = ""
    wait_ms: float | None = None
    closed_by: str = ""
    duration_ms: float | None = None

    def to_fields(self) -> dict[str, str]:
        """The stream entry's fields."""
        return {
            "type": "handoff",
            "chat_id": self.chat_id,
            "turn_id": self.turn_id,
            "event": self.event,
            "trigger": self.trigger,
            "reason": self.reason,
            "wait_ms": "" if self.wait_ms is None else f"{self.wait_ms:.0f}",
            "closed_by": self.closed_by,
            "duration_ms": "" if self.duration_ms is None else f"{self.duration_ms:.0f}",
        }


AuditEntry = ToolAuditEntry | TurnAuditEntry


class AuditSink(Protocol):
    """Where a turn's audit entries go, all at once at the end of the turn.

    ``write`` must not raise: an audit failure never costs the customer an answer.
    """

    async def write(self, entries: Sequence[AuditEntry]) -> None:
        """Append the entries, in order."""
        ...

    async def write_fields(self, entries: Sequence[Mapping[str, str]]) -> None:
        """Append entries given as stream fields; a turn's entries are written once."""
        ...
