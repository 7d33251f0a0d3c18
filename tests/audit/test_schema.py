"""The audit schema: every entry type survives its stream fields, and reads back as written."""

import pytest
import redis
import redis.asyncio as aioredis

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.audit.schema import (
    INVALID_TOOL_NAME,
    AuditEntry,
    ToolAuditEntry,
    TurnAuditEntry,
    read_entry,
    with_outcome,
)
from bot.audit.stream import StreamEntry
from bot.support_audit.reader import AuditStreamReader
from bot.telegram.update_jobs import _with_delivery
from bot.testing.audit_entries import simple_turn
from tools.execution import ToolExecutionRecord
from turn import ToolStatus, TurnOutcome, Usage

STREAM = "support:audit"
NO_USAGE = Usage(prompt_tokens=None, completion_tokens=None, total_tokens=None)


def _tool(status: ToolStatus, error_code: str | None) -> ToolAuditEntry:
    return ToolAuditEntry(
        chat_id="100200300",
        turn_id="K7M2QX9PAF",
        step=2,
        call_id="call_1",
        tool_name="get_order_status",
        status=status,
        error_code=error_code,
        started_at="2026-12-01T09:30:00+00:00",
        duration_ms=12.5,
    )


def _turn(outcome: TurnOutcome, usage: Usage, queue_ms: float | None) -> TurnAuditEntry:
    return TurnAuditEntry(
        chat_id="pseudonym-or-id",
        turn_id="K7M2QX9PAF",
        outcome=outcome,
        model="gpt-4.1-mini",
        model_steps=3,
        tool_calls=2,
        tool_names=("get_order_status", "search_products"),
        usage=usage,
        latency_ms=2051.25,
        queue_ms=queue_ms,
        prompt_id="support_chat",
        prompt_version="1.2.0",
    )


EVERY_ENTRY: list[AuditEntry] = [
    *(
        _tool(status, None if status is ToolStatus.SUCCESS else "some_code")
        for status in ToolStatus
    ),
    *(
        _turn(outcome, Usage(prompt_tokens=800, completion_tokens=100, total_tokens=900), 4.25)
        for outcome in TurnOutcome
    ),
    _turn(TurnOutcome.TOOL_FAILURE, NO_USAGE, None),
]


@pytest.mark.parametrize("entry", EVERY_ENTRY, ids=repr)
def test_every_entry_type_round_trips_through_its_stream_fields(entry: AuditEntry) -> None:
    fields = entry.to_fields()

    assert all(isinstance(value, str) for value in fields.values())
    assert type(entry).from_fields(fields) == entry
    assert read_entry(fields) == entry


def test_a_tool_entry_is_built_from_the_executors_record() -> None:
    record = ToolExecutionRecord(
        call_id="call_9",
        tool_name="get_order_status",
        started_at="2026-12-01T09:30:00+00:00",
        duration_seconds=0.25,
        status=ToolStatus.TIMEOUT,
        error_code="timeout",
    )

    entry = ToolAuditEntry.from_record(record, chat_id="42", turn_id="K7M2QX9PAF", step=1)

    assert entry.to_fields() == {
        "type": "tool",
        "call_id": "call_9",
        "tool_name": "get_order_status",
        "status": "timeout",
        "error_code": "timeout",
        "started_at": "2026-12-01T09:30:00+00:00",
        "duration_ms": "250.000",
        "chat_id": "42",
        "turn_id": "K7M2QX9PAF",
        "step": "1",
    }


def test_older_or_unknown_entries_read_tolerantly() -> None:
    turn = read_entry({"type": "turn", "outcome": "some_new_outcome", "latency_ms": "nan"})
    tool = read_entry({"type": "tool", "status": "paused", "step": "x", "tool_name": "lookup"})

    assert isinstance(turn, TurnAuditEntry)
    assert turn.outcome == "some_new_outcome"
    assert not isinstance(turn.outcome, TurnOutcome)
    assert (turn.latency_ms, turn.model_steps, turn.tool_calls, turn.queue_ms) == (
        None,
        None,
        None,
        None,
    )
    assert turn.usage == NO_USAGE
    assert (turn.chat_id, turn.tool_names, turn.prompt_id) == ("", (), "")
    assert isinstance(tool, ToolAuditEntry)
    assert (tool.status, tool.step, tool.duration_ms, tool.error_code) == (
        "paused",
        None,
        None,
        None,
    )
    assert tool.to_fields()["status"] == "paused"
    assert read_entry({"type": "heartbeat"}) is None
    assert read_entry({}) is None


def test_a_made_up_tool_name_is_never_written() -> None:
    customer_text = "Привет, мой адрес ..."
    tool = _tool(ToolStatus.REJECTED, "unknown_tool")
    tool = ToolAuditEntry.from_fields({**tool.to_fields(), "tool_name": customer_text})
    turn = _turn(TurnOutcome.TOOL_FAILURE, NO_USAGE, None)
    turn = TurnAuditEntry.from_fields({**turn.to_fields(), "tool_names": customer_text})

    assert tool.to_fields()["tool_name"] == INVALID_TOOL_NAME
    assert set(turn.to_fields()["tool_names"].split(",")) == {INVALID_TOOL_NAME}


def test_delivery_sets_only_an_answered_turns_outcome() -> None:
    usage = Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3)
    answered = {**_turn(TurnOutcome.ANSWERED, usage, 1.0).to_fields(), "queued_at": "x"}
    failed = _turn(TurnOutcome.LIMIT, usage, 1.0).to_fields()
    tool = _tool(ToolStatus.SUCCESS, None).to_fields()

    assert _with_delivery(answered, delivered=False) == {**answered, "outcome": "undelivered"}
    assert _with_delivery(answered, delivered=True) == answered
    assert _with_delivery(failed, delivered=False) == failed
    assert _with_delivery(tool, delivered=False) == tool
    assert with_outcome(failed, TurnOutcome.ERROR) == {**failed, "outcome": "error"}


async def test_entries_written_by_the_sink_read_back_equal_through_the_reader(
    redis_client: aioredis.Redis, sync_redis: redis.Redis
) -> None:
    written = [
        *simple_turn("K7M2QX9PAF", tools=("get_order_status", "search_products")),
        _turn(TurnOutcome.MODEL_UNAVAILABLE, NO_USAGE, None),
    ]
    written[-1] = TurnAuditEntry.from_fields({**written[-1].to_fields(), "turn_id": "OTHERTURN2"})
    sink = RedisStreamAuditSink(redis_client, stream=STREAM, maxlen=1000)
    await sink.write(written[:-1])
    await sink.write(written[-1:])
    reader = AuditStreamReader(sync_redis, STREAM)

    read: list[StreamEntry] = list(reader.scan())

    assert [entry.entry for entry in read] == written
    assert [entry.entry for entry in reader.turn("K7M2QX9PAF")] == written[:-1]
