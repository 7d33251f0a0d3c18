"""The audit schema: each stream entry type once, with its conversion to and from stream fields.

A stream entry is a flat map of string fields. Each entry type is a frozen
dataclass whose fields say, in their metadata, which stream field holds them
and how (:func:`stream`); :class:`StreamRecord` derives ``to_fields`` and
``from_fields`` from that, so every stream field is named once. The sink
writes ``to_fields``; the readers (reader, stats, render, export, CLI), the
metrics and the outbox read them back with :func:`read_entry` (or each type's
``from_fields``).

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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar, Generic, Self, TypeVar

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
# A shop's MCP tool only: the server it belongs to (MCP_SERVERS name).
MCP_SERVER = "mcp_server"
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
INPUT_KIND = "input_kind"
LANGUAGE = "language"
VOICE_SECONDS = "voice_seconds"
TRANSCRIPTION_MS = "transcription_ms"
# Handoff entries (opened): why the conversation was handed to a person.
HANDOFF_REASON = "handoff_reason"
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
    ANALYSIS = "analysis"
    LINK = "link"
    # Staff assist: a suggested reply's steps (bot/audit/assist.py).
    ASSIST = "assist"


# A registered tool's name always fits this (tools.registry); a name the model made
# up that does not fit may be any text at all, even the customer's, so it is not written.
_TOOL_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
INVALID_TOOL_NAME = "(invalid name)"


def safe_tool_name(name: str) -> str:
    """``name`` if it is shaped like a tool name, else ``(invalid name)``."""
    return name if _TOOL_NAME.fullmatch(name) is not None else INVALID_TOOL_NAME


_Value = TypeVar("_Value")
_Known = TypeVar("_Known", bound=StrEnum)


@dataclass(frozen=True, slots=True, kw_only=True)
class Codec(Generic[_Value]):
    """How a value is written as the text of one stream field, and read back from it.

    ``decode`` gets ``None`` for a field the entry lacks, and reads tolerantly.
    """

    encode: Callable[[_Value], str]
    decode: Callable[[str | None], _Value]


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


def _milliseconds(places: int) -> Codec[float | None]:
    return Codec(
        encode=lambda value: "" if value is None else f"{value:.{places}f}", decode=number_of
    )


def known(kind: type[_Known]) -> Codec[_Known | str]:
    """A value of ``kind``, kept as its text when this version does not know it."""

    def decode(text: str | None) -> _Known | str:
        try:
            return kind(text or "")
        except ValueError:
            return text or ""

    return Codec(encode=str, decode=decode)


TEXT: Codec[str] = Codec(encode=str, decode=lambda text: text or "")
"""Text; a missing field reads as ``""``."""
OPTIONAL_TEXT: Codec[str | None] = Codec(
    encode=lambda value: value or "", decode=lambda text: text or None
)
"""Text that may be absent: ``None`` is written as ``""`` and ``""`` reads as ``None``."""
TOOL_NAME_TEXT: Codec[str] = Codec(encode=safe_tool_name, decode=TEXT.decode)
"""A tool name; one the model made up is written as ``(invalid name)``."""
TOOL_NAME_LIST: Codec[tuple[str, ...]] = Codec(
    encode=lambda names: ",".join(safe_tool_name(name) for name in names),
    decode=lambda text: tuple(text.split(",")) if text else (),
)
"""Tool names, comma-separated, each written as :data:`TOOL_NAME_TEXT` writes one."""
INTEGER: Codec[int | None] = Codec(
    encode=lambda value: "" if value is None else str(value), decode=_integer
)
"""A count; ``None`` is written as ``""``."""
MILLISECONDS = _milliseconds(3)
"""A duration in milliseconds, to the microsecond."""
WHOLE_MILLISECONDS = _milliseconds(0)
"""A duration in whole milliseconds (people's waits: a handoff's, a customer's decision)."""
INPUT_KIND_TEXT: Codec[str] = Codec(encode=str, decode=lambda text: text or "text")
"""A turn's input kind; an entry written before kinds were recorded was text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Layout:
    """Where a dataclass field's value lives on the stream: how it is written and read back."""

    write: Callable[[Any], dict[str, str]]
    read: Callable[[Mapping[str, str]], Any]
    # Given the whole entry: whether this field is written at all.
    written_if: Callable[[Any], bool] | None = None


_LAYOUT = "stream_layout"


def stream_field(
    name: str, codec: Codec[Any] = TEXT, *, written_if: Callable[[Any], bool] | None = None
) -> dict[str, object]:
    """Field metadata: the value is stream field ``name``, as ``codec`` writes it.

    With ``written_if``, the field is written only for the entries it holds for.
    """
    layout = _Layout(
        write=lambda value: {name: codec.encode(value)},
        read=lambda fields: codec.decode(fields.get(name)),
        written_if=written_if,
    )
    return {_LAYOUT: layout}


def spread_fields(
    kind: Callable[..., object], codec: Codec[Any], names: Mapping[str, str]
) -> dict[str, object]:
    """Field metadata: the value (built by ``kind``) is spread over several stream fields.

    ``names`` maps each of its attributes to its stream field; ``codec`` writes each one.
    """
    layout = _Layout(
        write=lambda value: {
            name: codec.encode(getattr(value, attribute)) for attribute, name in names.items()
        },
        read=lambda fields: kind(
            **{attribute: codec.decode(fields.get(name)) for attribute, name in names.items()}
        ),
    )
    return {_LAYOUT: layout}


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamRecord:
    """An entry type of the audit stream: a dataclass whose every field has stream metadata.

    Subclasses set ``entry_type`` (the ``type`` field) and declare each field
    with :func:`stream_field` or :func:`spread_fields` metadata, in the order
    the stream entry lists them.
    """

    entry_type: ClassVar[EntryType]

    def to_fields(self) -> dict[str, str]:
        """The stream entry's fields: ``type``, then each field as its metadata writes it."""
        written = {TYPE: self.entry_type.value}
        for name, layout in _layouts(self):
            if layout.written_if is None or layout.written_if(self):
                written |= layout.write(getattr(self, name))
        return written

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> Self:
        """The entry in ``fields``, read tolerantly (see the module docstring)."""
        return cls(**{name: layout.read(fields) for name, layout in _layouts(cls)})


def _layouts(record: StreamRecord | type[StreamRecord]) -> tuple[tuple[str, _Layout], ...]:
    # Per class, once: a turn writes three entries of a dozen fields each.
    kind = record if isinstance(record, type) else type(record)
    found = _LAYOUTS.get(kind)
    if found is None:
        found = tuple(_layouts_of(kind))
        _LAYOUTS[kind] = found
    return found


def _layouts_of(record: type[StreamRecord]) -> Iterator[tuple[str, _Layout]]:
    for declared in fields(record):
        layout = declared.metadata.get(_LAYOUT)
        if not isinstance(layout, _Layout):
            raise TypeError(f"{declared.name} of {record} has no stream field metadata")
        yield declared.name, layout


_LAYOUTS: dict[type[StreamRecord], tuple[tuple[str, _Layout], ...]] = {}


def _searched(entry: "ToolAuditEntry") -> bool:
    return entry.result_count is not None


def _from_mcp(entry: "ToolAuditEntry") -> bool:
    return entry.mcp_server is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolAuditEntry(StreamRecord):
    """One tool execution of one turn (``step`` is the model call that asked for it).

    Built from the executor's record with :meth:`from_record`; read back from
    the stream with :meth:`from_fields`. ``status`` is text only when read from
    an entry whose status this version does not know.
    """

    entry_type = EntryType.TOOL

    call_id: str = field(metadata=stream_field(CALL_ID))
    tool_name: str = field(metadata=stream_field(TOOL_NAME, TOOL_NAME_TEXT))
    status: ToolStatus | str = field(metadata=stream_field(STATUS, known(ToolStatus)))
    error_code: str | None = field(metadata=stream_field(ERROR_CODE, OPTIONAL_TEXT))
    started_at: str = field(metadata=stream_field(STARTED_AT))
    duration_ms: float | None = field(metadata=stream_field(DURATION_MS, MILLISECONDS))
    chat_id: str = field(metadata=stream_field(CHAT_ID))
    turn_id: str = field(metadata=stream_field(TURN_ID))
    step: int | None = field(metadata=stream_field(STEP, INTEGER))
    # Search-like tools only: both written when the tool reported a result count.
    result_count: int | None = field(
        default=None, metadata=stream_field(RESULT_COUNT, INTEGER, written_if=_searched)
    )
    top_result_id: str | None = field(
        default=None, metadata=stream_field(TOP_RESULT, OPTIONAL_TEXT, written_if=_searched)
    )
    mcp_server: str | None = field(
        default=None, metadata=stream_field(MCP_SERVER, OPTIONAL_TEXT, written_if=_from_mcp)
    )

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
            mcp_server=record.server,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnAuditEntry(StreamRecord):
    """How one turn ended (``outcome`` is ``answered`` or the failure kind).

    Numbers are ``None`` only when read from an entry that lacks them;
    ``outcome`` is text only when read from an entry whose outcome this
    version does not know.
    """

    entry_type = EntryType.TURN

    chat_id: str = field(metadata=stream_field(CHAT_ID))
    turn_id: str = field(metadata=stream_field(TURN_ID))
    outcome: TurnOutcome | str = field(metadata=stream_field(OUTCOME, known(TurnOutcome)))
    model: str = field(metadata=stream_field(MODEL))
    model_steps: int | None = field(metadata=stream_field(MODEL_STEPS, INTEGER))
    tool_calls: int | None = field(metadata=stream_field(TOOL_CALLS, INTEGER))
    tool_names: tuple[str, ...] = field(metadata=stream_field(TOOL_NAMES, TOOL_NAME_LIST))
    usage: Usage = field(
        metadata=spread_fields(
            Usage,
            INTEGER,
            {
                "prompt_tokens": PROMPT_TOKENS,
                "completion_tokens": COMPLETION_TOKENS,
                "total_tokens": TOTAL_TOKENS,
            },
        )
    )
    latency_ms: float | None = field(metadata=stream_field(LATENCY_MS, MILLISECONDS))
    queue_ms: float | None = field(default=None, metadata=stream_field(QUEUE_MS, MILLISECONDS))
    prompt_id: str = field(metadata=stream_field(PROMPT_ID))
    prompt_version: str = field(metadata=stream_field(PROMPT_VERSION))
    # Only where the outcome needs one (``failed``); not written when empty.
    error_code: str = field(
        default="",
        metadata=stream_field(ERROR_CODE, written_if=lambda entry: bool(entry.error_code)),
    )
    # How the message came: text, voice (transcribed) or photo; never its words.
    input_kind: str = field(default="text", metadata=stream_field(INPUT_KIND, INPUT_KIND_TEXT))
    # A voice message's length and its transcription's time; written for voice only.
    voice_seconds: int | None = field(
        default=None,
        metadata=stream_field(
            VOICE_SECONDS, INTEGER, written_if=lambda entry: entry.voice_seconds is not None
        ),
    )
    transcription_ms: float | None = field(
        default=None,
        metadata=stream_field(
            TRANSCRIPTION_MS,
            WHOLE_MILLISECONDS,
            written_if=lambda entry: entry.transcription_ms is not None,
        ),
    )
    # The conversation's language (a LANGUAGES code, never text); empty in entries written
    # before languages were recorded, and not written then.
    language: str = field(
        default="",
        metadata=stream_field(LANGUAGE, written_if=lambda entry: bool(entry.language)),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffAuditEntry(StreamRecord):
    """A step of a human handoff: ``opened``, ``first_reply`` or ``closed``; never text.

    ``trigger`` and ``reason`` (opened) are closed categories, ``handoff_reason`` one of
    seven (:data:`~bot.queue.staff_actions.HANDOFF_REASONS`); ``wait_ms`` is the
    customer's wait for the first staff reply; ``closed_by`` is ``staff`` or
    ``idle`` and ``duration_ms`` the handoff's length. Readers of turns and tools
    pass these by (``read_entry`` gives ``None``); the handoff commands read them.
    """

    entry_type = EntryType.HANDOFF

    chat_id: str = field(metadata=stream_field(CHAT_ID))
    turn_id: str = field(metadata=stream_field(TURN_ID))
    event: str = field(metadata=stream_field("event"))
    trigger: str = field(default="", metadata=stream_field("trigger"))
    reason: str = field(default="", metadata=stream_field("reason"))
    # Opened only: why, one of seven (empty in entries written before reasons were recorded).
    handoff_reason: str = field(
        default="",
        metadata=stream_field(HANDOFF_REASON, written_if=lambda entry: bool(entry.handoff_reason)),
    )
    wait_ms: float | None = field(
        default=None, metadata=stream_field("wait_ms", WHOLE_MILLISECONDS)
    )
    closed_by: str = field(default="", metadata=stream_field("closed_by"))
    duration_ms: float | None = field(
        default=None, metadata=stream_field(DURATION_MS, WHOLE_MILLISECONDS)
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
