"""Actions as the audit stream tells them: ``type=action`` entries, their list and their rates.

An action's steps are ``proposed`` (the model called a write tool, the card
was shown), then one of ``confirmed``, ``declined``, ``expired`` or
``superseded`` (a newer proposal replaced it), and after a confirmation
``executed`` or ``failed``. An entry names the action, the tool, the chat and
the turn, the time the customer took to decide and the execution's time;
never the arguments, the address or the reason.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from bot.audit.schema import (
    CHAT_ID,
    DURATION_MS,
    ERROR_CODE,
    MILLISECONDS,
    TOOL_NAME,
    TOOL_NAME_TEXT,
    TURN_ID,
    WHOLE_MILLISECONDS,
    EntryType,
    StreamRecord,
    stream_field,
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionAuditEntry(StreamRecord):
    """One step of one action; ``decide_ms`` from the proposal to the press, ``duration_ms``
    the handler's run (``executed``/``failed``). Ids, names, codes and times only."""

    entry_type = EntryType.ACTION

    chat_id: str = field(metadata=stream_field(CHAT_ID))
    turn_id: str = field(metadata=stream_field(TURN_ID))
    event: str = field(metadata=stream_field("event"))
    action_id: str = field(metadata=stream_field("action_id"))
    tool_name: str = field(metadata=stream_field(TOOL_NAME, TOOL_NAME_TEXT))
    error_code: str = field(default="", metadata=stream_field(ERROR_CODE))
    decide_ms: float | None = field(
        default=None, metadata=stream_field("decide_ms", WHOLE_MILLISECONDS)
    )
    duration_ms: float | None = field(
        default=None, metadata=stream_field(DURATION_MS, MILLISECONDS)
    )


def action_entry(entry: StreamEntry) -> ActionAuditEntry | None:
    """The action step in a stream entry, ``None`` for other entry types."""
    return entry.read_as(ActionAuditEntry)


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
