"""Audit entries for tests, with every field chosen by the test, and reading them back."""

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import redis

from bot.audit.index import write_once
from bot.audit.schema import AuditEntry, ToolAuditEntry, TurnAuditEntry
from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.keys import RedisKeys
from tools.execution import ToolExecutionRecord
from turn import ToolStatus, TurnOutcome, Usage

BASE_TIME = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def tool_entry(
    turn_id: str,
    *,
    chat_id: str = "100200300",
    tool_name: str = "get_order_status",
    status: ToolStatus = ToolStatus.SUCCESS,
    error_code: str | None = None,
    duration_ms: float = 12.5,
    step: int = 1,
    call_id: str = "call_1",
    started_at: datetime = BASE_TIME,
) -> ToolAuditEntry:
    """One tool entry."""
    record = ToolExecutionRecord(
        call_id=call_id,
        tool_name=tool_name,
        started_at=started_at.isoformat(),
        duration_seconds=duration_ms / 1000,
        status=status,
        error_code=error_code,
    )
    return ToolAuditEntry.from_record(record, chat_id=chat_id, turn_id=turn_id, step=step)


def turn_entry(
    turn_id: str,
    *,
    chat_id: str = "100200300",
    outcome: TurnOutcome = TurnOutcome.ANSWERED,
    tool_names: tuple[str, ...] = (),
    latency_ms: float = 1500.0,
    total_tokens: int | None = 900,
    model_steps: int = 1,
) -> TurnAuditEntry:
    """One turn entry (prompt and completion tokens follow ``total_tokens``)."""
    return TurnAuditEntry(
        chat_id=chat_id,
        turn_id=turn_id,
        outcome=outcome,
        model="gpt-4.1-mini",
        model_steps=model_steps,
        tool_calls=len(tool_names),
        tool_names=tool_names,
        usage=Usage(
            prompt_tokens=None if total_tokens is None else total_tokens - 100,
            completion_tokens=None if total_tokens is None else 100,
            total_tokens=total_tokens,
        ),
        latency_ms=latency_ms,
        prompt_id="support_chat",
        prompt_version="1.2.0",
    )


def simple_turn(
    turn_id: str, *, chat_id: str = "100200300", tools: tuple[str, ...] = ("get_order_status",)
) -> list[AuditEntry]:
    """A successful turn: one successful call of each tool, then the turn entry."""
    entries: list[AuditEntry] = [
        tool_entry(turn_id, chat_id=chat_id, tool_name=name, call_id=f"call_{turn_id}_{index}")
        for index, name in enumerate(tools)
    ]
    entries.append(turn_entry(turn_id, chat_id=chat_id, tool_names=tools))
    return entries


def append(
    client: redis.Redis, stream: str, entries: list[AuditEntry], at: datetime | None = None
) -> list[str]:
    """XADD the entries' fields as the sink would; ``at`` backdates their ids."""
    ids = []
    for index, entry in enumerate(entries):
        entry_id = "*" if at is None else f"{int(at.timestamp() * 1000)}-{index}"
        ids.append(str(client.xadd(stream, entry.to_fields(), id=entry_id)))  # type: ignore[arg-type]
    return ids


def append_indexed(
    client: redis.Redis, stream: str, entries: Sequence[Mapping[str, str]], maxlen: int = 1_000_000
) -> bool:
    """Write one turn's entry fields as the sink does (its write-once script, with the index).

    ``False`` when the turn was written before (the script changed nothing).
    """
    turn_id = entries[0].get("turn_id") or "none"
    call = write_once(
        RedisKeys.audit_index(stream),
        stream,
        RedisKeys.audit_done(stream, turn_id),
        entries,
        maxlen=maxlen,
        done_ttl_seconds=24 * 3600,
    )
    keys = call.keys()
    return bool(client.eval(call.SOURCE, len(keys), *keys, *call.args()))


def hours_ago(hours: float) -> datetime:
    """A moment ``hours`` before now."""
    return datetime.now(UTC) - timedelta(hours=hours)


async def stream_entries(client: AsyncRedisClient, stream: str) -> list[dict[str, str]]:
    """Every entry of ``stream``, oldest first, as text fields."""
    entries = await client.xrange(stream) or []
    return [{text_of(k): text_of(v) for k, v in (fields or {}).items()} for _, fields in entries]
