"""The AuditSink contract, run against every implementation (Redis stream, recording)."""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.audit.schema import AuditEntry
from bot.audit.sink import AuditSink
from bot.testing.audit_entries import simple_turn, stream_entries, tool_entry, turn_entry
from bot.testing.recording_audit_sink import RecordingAuditSink


@dataclass
class SinkUnderTest:
    """A sink and how to read back, as stream fields, everything it has written."""

    sink: AuditSink
    written: Callable[[], Awaitable[list[dict[str, str]]]]


@pytest.fixture(params=["redis", "recording"])
def audit(request: pytest.FixtureRequest) -> SinkUnderTest:
    """Each implementation, empty."""
    if request.param == "redis":
        client = request.getfixturevalue("redis_client")
        return SinkUnderTest(
            RedisStreamAuditSink(client, "contract:audit", 1_000_000),
            lambda: stream_entries(client, "contract:audit"),
        )
    recording = RecordingAuditSink()

    async def written() -> list[dict[str, str]]:
        return [entry.to_fields() for entry in recording.entries]

    return SinkUnderTest(recording, written)


async def test_a_turns_entries_are_written_in_order_with_their_fields(audit: SinkUnderTest):
    entries = simple_turn("CONTRACT01", tools=("get_order_status", "get_support_hours"))

    await audit.sink.write(entries)

    assert await audit.written() == [entry.to_fields() for entry in entries]


async def test_later_writes_come_after_earlier_ones(audit: SinkUnderTest):
    first, second = simple_turn("CONTRACT01"), simple_turn("CONTRACT02", tools=())

    await audit.sink.write(first)
    await audit.sink.write(second)

    assert await audit.written() == [entry.to_fields() for entry in (*first, *second)]


async def test_concurrent_turns_lose_nothing_and_keep_each_turns_order(audit: SinkUnderTest):
    turns: dict[str, list[AuditEntry]] = {
        f"TURN{index:04d}": [
            *(tool_entry(f"TURN{index:04d}", call_id=f"c{step}", step=step) for step in range(3)),
            turn_entry(f"TURN{index:04d}"),
        ]
        for index in range(30)
    }

    await asyncio.gather(*(audit.sink.write(entries) for entries in turns.values()))

    rows = await audit.written()
    assert len(rows) == 4 * len(turns)
    for turn_id, entries in turns.items():
        assert [row for row in rows if row["turn_id"] == turn_id] == [
            entry.to_fields() for entry in entries
        ]


async def test_an_empty_write_writes_nothing(audit: SinkUnderTest):
    await audit.sink.write([])

    assert await audit.written() == []
