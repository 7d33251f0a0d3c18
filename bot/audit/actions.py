"""Actions as the audit stream tells them: ``type=action`` entries, their list and their rates.

An action's steps are ``proposed`` (the model called a write tool, the card
was shown), then one of ``confirmed``, ``declined``, ``expired`` or
``superseded`` (a newer proposal replaced it), and after a confirmation
``executed`` or ``failed``. An entry names the action, the tool, the chat and
the turn, the time the customer took to decide and the execution's time;
never the arguments, the address or the reason.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from bot.audit.schema import (
    CHAT_ID,
    ERROR_CODE,
    TOOL_NAME,
    TURN_ID,
    TYPE,
    EntryType,
    number_of,
    safe_tool_name,
)
from bot.audit.stats import Distribution
from bot.audit.stream import StreamEntry

ActionEvent = Literal[
    "proposed", "confirmed", "declined", "expired", "superseded", "executed", "failed"
]
ACTION_EVENTS: tuple[ActionEvent, ...] = (
    "proposed",
    "confirmed",
    "declined",
    "expired",
    "superseded",
    "executed",
    "failed",
)

ACTION_ID = "action_id"
EVENT = "event"
DECIDE_MS = "decide_ms"
DURATION_MS = "duration_ms"


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionAuditEntry:
    """One step of one action; ``decide_ms`` from the proposal to the press, ``duration_ms``
    the handler's run (``executed``/``failed``)."""

    chat_id: str
    turn_id: str
    event: str
    action_id: str
    tool_name: str
    error_code: str = ""
    decide_ms: float | None = None
    duration_ms: float | None = None

    def to_fields(self) -> dict[str, str]:
        """The stream entry's fields: ids, names, codes and times only."""
        return {
            TYPE: EntryType.ACTION.value,
            CHAT_ID: self.chat_id,
            TURN_ID: self.turn_id,
            EVENT: self.event,
            ACTION_ID: self.action_id,
            TOOL_NAME: safe_tool_name(self.tool_name),
            ERROR_CODE: self.error_code,
            DECIDE_MS: "" if self.decide_ms is None else f"{self.decide_ms:.0f}",
            DURATION_MS: "" if self.duration_ms is None else f"{self.duration_ms:.3f}",
        }

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> "ActionAuditEntry":
        """The entry back from its stream fields (missing ones read as empty)."""
        return cls(
            chat_id=fields.get(CHAT_ID, ""),
            turn_id=fields.get(TURN_ID, ""),
            event=fields.get(EVENT, ""),
            action_id=fields.get(ACTION_ID, ""),
            tool_name=fields.get(TOOL_NAME, ""),
            error_code=fields.get(ERROR_CODE, ""),
            decide_ms=number_of(fields.get(DECIDE_MS)),
            duration_ms=number_of(fields.get(DURATION_MS)),
        )


def action_entry(entry: StreamEntry) -> ActionAuditEntry | None:
    """The action step in a stream entry, ``None`` for other entry types."""
    return entry.read_as(EntryType.ACTION, ActionAuditEntry.from_fields)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolActionStats:
    """One write tool's actions: how many reached each event, and the time to decide."""

    tool_name: str
    counts: dict[str, int]
    decide_ms: Distribution


def action_stats(entries: Iterable[StreamEntry]) -> list[ToolActionStats]:
    """Per write tool (by name): counts per event and p50/p95 of the time to decide."""
    counts: dict[str, dict[str, int]] = {}
    decide: dict[str, list[float]] = {}
    for entry in entries:
        step = action_entry(entry)
        if step is None:
            continue
        per_tool = counts.setdefault(step.tool_name, dict.fromkeys(ACTION_EVENTS, 0))
        per_tool[step.event] = per_tool.get(step.event, 0) + 1
        if step.decide_ms is not None and step.event in ("confirmed", "declined"):
            decide.setdefault(step.tool_name, []).append(step.decide_ms)
    return [
        ToolActionStats(
            tool_name=name,
            counts=counts[name],
            decide_ms=Distribution.of(decide.get(name, [])),
        )
        for name in sorted(counts)
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionStep:
    """One action step with when it was recorded (what ``support-audit actions`` lists)."""

    at: datetime
    step: ActionAuditEntry


def action_steps(entries: Iterable[StreamEntry]) -> list[ActionStep]:
    """Every action step among ``entries``, oldest first."""
    steps: list[ActionStep] = []
    for entry in entries:
        step = action_entry(entry)
        if step is not None:
            steps.append(ActionStep(at=entry.recorded_at, step=step))
    return steps


def step_json(step: ActionStep) -> dict[str, object]:
    """One step as a JSON object (ids, names, codes and times: nothing the customer wrote)."""
    entry = step.step
    return {
        "at": step.at.isoformat(timespec="milliseconds"),
        "chat_id": entry.chat_id,
        "turn_id": entry.turn_id,
        "action_id": entry.action_id,
        "tool_name": entry.tool_name,
        "event": entry.event,
        "error_code": entry.error_code or None,
        "decide_ms": entry.decide_ms,
        "duration_ms": entry.duration_ms,
    }


def stats_json(stats: Iterable[ToolActionStats]) -> dict[str, object]:
    """``stats --json``'s ``actions`` object: per tool, counts and the time to decide."""
    return {
        tool.tool_name: {
            **tool.counts,
            "decide_ms": {"p50": tool.decide_ms.p50, "p95": tool.decide_ms.p95},
        }
        for tool in stats
    }


def stats_lines(stats: Iterable[ToolActionStats]) -> list[str]:
    """``stats``' lines about actions, one per write tool."""
    lines: list[str] = []
    for tool in stats:
        counts = tool.counts
        decide = tool.decide_ms
        lines.append(
            f"actions {tool.tool_name}: {counts.get('proposed', 0)} proposed, "
            f"{counts.get('confirmed', 0)} confirmed, {counts.get('declined', 0)} declined, "
            f"{counts.get('expired', 0)} expired, {counts.get('failed', 0)} failed; "
            f"time to decide p50 {_seconds(decide.p50)}  p95 {_seconds(decide.p95)}"
        )
    return lines


def _seconds(value_ms: float | None) -> str:
    return "-" if value_ms is None else f"{value_ms / 1000:.1f}s"
