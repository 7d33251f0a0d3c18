"""The audit schema: each stream entry type once, with its conversion to and from stream fields.

A stream entry is a flat map of string fields. The sink writes
:meth:`ToolAuditEntry.to_fields` / :meth:`TurnAuditEntry.to_fields`; the
readers (reader, stats, render, export, CLI), the metrics and the outbox
read them back with :func:`read_entry` (or each type's ``from_fields``).

Reading is tolerant, because the stream outlives versions of the bot: a
missing field reads as ``None`` (numbers) or ``""`` (text), a number that is
not a finite number reads as ``None``, and a status or outcome this version
does not know is kept as its text so that staff still see it.

Names: a :class:`~tools.execution.ToolExecutionRecord` is what the executor
measured about one execution; a :class:`ToolAuditEntry` is that record placed
in its turn (chat, turn, model step), as the audit stream holds it.
"""

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from tools.execution import ToolExecutionRecord
from turn import ToolStatus, TurnOutcome, Usage

# Field names, shared by both entry types where they mean the same.
TYPE = "type"
CHAT_ID = "chat_id"
TURN_ID = "turn_id"
# Tool entries.
CALL_ID = "call_id"
TOOL_NAME = "tool_name"
STATUS = "status"
ERROR_CODE = "error_code"
STARTED_AT = "started_at"
DURATION_MS = "duration_ms"
STEP = "step"
# Search-like tools only (search_help_center): how many results, the first one's id.
RESULT_COUNT = "result_count"
TOP_RESULT = "top_result"
# Turn entries.
OUTCOME = "outcome"
MODEL = "model"
MODEL_STEPS = "model_steps"
TOOL_CALLS = "tool_calls"
TOOL_NAMES = "tool_names"
PROMPT_TOKENS = "prompt_tokens"
COMPLETION_TOKENS = "completion_tokens"
TOTAL_TOKENS = "total_tokens"
LATENCY_MS = "latency_ms"
QUEUE_MS = "queue_ms"
PROMPT_ID = "prompt_id"
PROMPT_VERSION = "prompt_version"
# Added by the sink to entries Redis took late (when they were first due).
QUEUED_AT = "queued_at"


class TurnErrorCode(StrEnum):
    """A turn entry's ``error_code``: why a turn failed where its outcome alone does not say."""

    # The job failed JOB_MAX_ATTEMPTS times without an outcome (its process died, or the
    # run crashed): given up, in the dead letters.
    POISON_JOB = "poison_job"


FAILED = "failed"
"""The outcome of a turn the queue gave up on (see :class:`TurnErrorCode`)."""


class EntryType(StrEnum):
    """The ``type`` field: which entry type the fields are."""

    TOOL = "tool"
    TURN = "turn"
    HANDOFF = "handoff"
    ACTION = "action"
    FEEDBACK = "feedback"


# A registered tool's name always fits this (tools.registry); a name the model made
# up that does not fit may be any text at all, even the customer's, so it is not written.
_TOOL_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
INVALID_TOOL_NAME = "(invalid name)"


def safe_tool_name(name: str) -> str:
    """``name`` if it is shaped like a tool name, else ``(invalid name)``."""
    return name if _TOOL_NAME.fullmatch(name) is not None else INVALID_TOOL_NAME


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolAuditEntry:
    """One tool execution of one turn (``step`` is the model call that asked for it).

    Built from the executor's record with :meth:`from_record`; read back from
    the stream with :meth:`from_fields`. ``status`` is text only when read from
    an entry whose status this version does not know.
    """

    chat_id: str
    turn_id: str
    step: int | None
    call_id: str
    tool_name: str
    status: ToolStatus | str
    error_code: str | None
    started_at: str
    duration_ms: float | None
    result_count: int | None = None
    top_result_id: str | None = None

    @classmethod
    def from_record(
        cls, record: ToolExecutionRecord, *, chat_id: str, turn_id: str, step: int
    ) -> "ToolAuditEntry":
        """The entry of ``record``, executed in turn ``turn_id`` at model step ``step``."""
        return cls(
            chat_id=chat_id,
            turn_id=turn_id,
            step=step,
            call_id=record.call_id,
            tool_name=record.tool_name,
            status=record.status,
            error_code=record.error_code,
            started_at=record.started_at,
            duration_ms=record.duration_seconds * 1000,
            result_count=record.result_count,
            top_result_id=record.top_result_id,
        )

    def to_fields(self) -> dict[str, str]:
        """The stream entry's fields (a made-up tool name is not written)."""
        search = (
            {RESULT_COUNT: str(self.result_count), TOP_RESULT: self.top_result_id or ""}
            if self.result_count is not None
            else {}
        )
        return {
            TYPE: EntryType.TOOL.value,
            CALL_ID: self.call_id,
            TOOL_NAME: safe_tool_name(self.tool_name),
            STATUS: str(self.status),
            ERROR_CODE: self.error_code or "",
            STARTED_AT: self.started_at,
            DURATION_MS: _milliseconds(self.duration_ms),
            CHAT_ID: self.chat_id,
            TURN_ID: self.turn_id,
            STEP: _optional(self.step),
        } | search

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> "ToolAuditEntry":
        """The entry in ``fields``, read tolerantly (see the module docstring)."""
        return cls(
            chat_id=fields.get(CHAT_ID, ""),
            turn_id=fields.get(TURN_ID, ""),
            step=_integer(fields.get(STEP)),
            call_id=fields.get(CALL_ID, ""),
            tool_name=fields.get(TOOL_NAME, ""),
            status=_known(ToolStatus, fields.get(STATUS, "")),
            error_code=fields.get(ERROR_CODE) or None,
            started_at=fields.get(STARTED_AT, ""),
            duration_ms=number_of(fields.get(DURATION_MS)),
            result_count=_integer(fields.get(RESULT_COUNT)),
            top_result_id=fields.get(TOP_RESULT) or None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnAuditEntry:
    """How one turn ended (``outcome`` is ``answered`` or the failure kind).

    Numbers are ``None`` only when read from an entry that lacks them;
    ``outcome`` is text only when read from an entry whose outcome this
    version does not know.
    """

    chat_id: str
    turn_id: str
    outcome: TurnOutcome | str
    model: str
    model_steps: int | None
    tool_calls: int | None
    tool_names: tuple[str, ...]
    usage: Usage
    latency_ms: float | None
    prompt_id: str
    prompt_version: str
    queue_ms: float | None = None
    # Only where the outcome needs one (``failed``); not written when empty.
    error_code: str = ""

    def to_fields(self) -> dict[str, str]:
        """The stream entry's fields (made-up tool names are not written)."""
        error = {ERROR_CODE: self.error_code} if self.error_code else {}
        return {
            TYPE: EntryType.TURN.value,
            CHAT_ID: self.chat_id,
            TURN_ID: self.turn_id,
            OUTCOME: str(self.outcome),
            MODEL: self.model,
            MODEL_STEPS: _optional(self.model_steps),
            TOOL_CALLS: _optional(self.tool_calls),
            TOOL_NAMES: ",".join(safe_tool_name(name) for name in self.tool_names),
            PROMPT_TOKENS: _optional(self.usage.prompt_tokens),
            COMPLETION_TOKENS: _optional(self.usage.completion_tokens),
            TOTAL_TOKENS: _optional(self.usage.total_tokens),
            LATENCY_MS: _milliseconds(self.latency_ms),
            QUEUE_MS: _milliseconds(self.queue_ms),
            PROMPT_ID: self.prompt_id,
            PROMPT_VERSION: self.prompt_version,
        } | error

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> "TurnAuditEntry":
        """The entry in ``fields``, read tolerantly (see the module docstring)."""
        names = fields.get(TOOL_NAMES, "")
        return cls(
            chat_id=fields.get(CHAT_ID, ""),
            turn_id=fields.get(TURN_ID, ""),
            outcome=_known(TurnOutcome, fields.get(OUTCOME, "")),
            model=fields.get(MODEL, ""),
            model_steps=_integer(fields.get(MODEL_STEPS)),
            tool_calls=_integer(fields.get(TOOL_CALLS)),
            tool_names=tuple(names.split(",")) if names else (),
            usage=Usage(
                prompt_tokens=_integer(fields.get(PROMPT_TOKENS)),
                completion_tokens=_integer(fields.get(COMPLETION_TOKENS)),
                total_tokens=_integer(fields.get(TOTAL_TOKENS)),
            ),
            latency_ms=number_of(fields.get(LATENCY_MS)),
            queue_ms=number_of(fields.get(QUEUE_MS)),
            prompt_id=fields.get(PROMPT_ID, ""),
            prompt_version=fields.get(PROMPT_VERSION, ""),
            error_code=fields.get(ERROR_CODE, ""),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffAuditEntry:
    """A step of a human handoff: ``opened``, ``first_reply`` or ``closed``; never text.

    ``trigger`` and ``reason`` (opened) are closed categories; ``wait_ms`` is the
    customer's wait for the first staff reply; ``closed_by`` is ``staff`` or
    ``idle`` and ``duration_ms`` the handoff's length. Readers of turns and tools
    pass these by (``read_entry`` gives ``None``); the handoff commands read them.
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
            TYPE: EntryType.HANDOFF.value,
            CHAT_ID: self.chat_id,
            TURN_ID: self.turn_id,
            "event": self.event,
            "trigger": self.trigger,
            "reason": self.reason,
            "wait_ms": "" if self.wait_ms is None else f"{self.wait_ms:.0f}",
            "closed_by": self.closed_by,
            "duration_ms": "" if self.duration_ms is None else f"{self.duration_ms:.0f}",
        }

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> "HandoffAuditEntry":
        """The entry back from its stream fields (missing ones read as empty)."""
        return cls(
            chat_id=fields.get(CHAT_ID, ""),
            turn_id=fields.get(TURN_ID, ""),
            event=fields.get("event", ""),
            trigger=fields.get("trigger", ""),
            reason=fields.get("reason", ""),
            wait_ms=number_of(fields.get("wait_ms")),
            closed_by=fields.get("closed_by", ""),
            duration_ms=number_of(fields.get("duration_ms")),
        )


AuditEntry = ToolAuditEntry | TurnAuditEntry
"""Every entry type of a turn (handoff steps are written on their own)."""


def read_entry(fields: Mapping[str, str]) -> AuditEntry | None:
    """The entry in ``fields`` by its ``type``; ``None`` for a type this version does not know."""
    kind = fields.get(TYPE)
    if kind == EntryType.TURN:
        return TurnAuditEntry.from_fields(fields)
    if kind == EntryType.TOOL:
        return ToolAuditEntry.from_fields(fields)
    return None


def with_outcome(fields: Mapping[str, str], outcome: TurnOutcome) -> dict[str, str]:
    """A turn entry's ``fields`` with ``outcome`` in place of its own; every other field as is."""
    return {**fields, OUTCOME: outcome.value}


_Known = TypeVar("_Known", ToolStatus, TurnOutcome)


def _known(kind: type[_Known], text: str) -> _Known | str:
    try:
        return kind(text)
    except ValueError:
        return text


def _optional(value: int | None) -> str:
    return "" if value is None else str(value)


def _milliseconds(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def number_of(text: str | None) -> float | None:
    """A numeric stream field as a finite number; ``None`` when absent, malformed or not finite."""
    try:
        value = float(text or "")
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _integer(text: str | None) -> int | None:
    try:
        return int(text or "")
    except ValueError:
        return None
