"""Handoffs in the metrics: opened by trigger, closed by whom, the wait for the first staff reply.

The handoff's audit entries reach the stream through the metrics sink like a
turn's; they are counted there, and never as tool executions.
"""

import asyncio
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry

from bot.audit.schema import AuditEntry, HandoffAuditEntry
from bot.metrics import BotMetrics, MetricsAuditSink


class Collected:
    """An audit sink that keeps what it was given (the stream's side is not the claim here)."""

    def __init__(self) -> None:
        self.fields: list[Mapping[str, str]] = []

    async def write(self, entries: Sequence[AuditEntry]) -> None:
        self.fields.extend(entry.to_fields() for entry in entries)

    async def write_fields(self, entries: Sequence[Mapping[str, str]]) -> None:
        self.fields.extend(entries)


def handoff(event: str, **fields: object) -> dict[str, str]:
    return HandoffAuditEntry(chat_id="c", turn_id="T", event=event, **fields).to_fields()  # type: ignore[arg-type]


def test_handoff_entries_are_counted_as_handoffs_and_never_as_tools() -> None:
    metrics = BotMetrics(CollectorRegistry(), known_tools=["get_order_status"])
    inner = Collected()
    sink = MetricsAuditSink(inner, metrics, lost_entries=lambda: 0)
    entries = [
        handoff("opened", trigger="command"),
        handoff("first_reply", wait_ms=95_000.0),
        handoff("closed", closed_by="staff", duration_ms=600_000.0),
        handoff("opened", trigger="something new"),
        handoff("closed", closed_by="idle"),
    ]

    asyncio.run(sink.write_fields(entries))

    value = metrics.registry.get_sample_value
    assert value("support_handoffs_opened_total", {"trigger": "command"}) == 1
    assert value("support_handoffs_opened_total", {"trigger": "other"}) == 1
    assert value("support_handoffs_closed_total", {"closed_by": "staff"}) == 1
    assert value("support_handoffs_closed_total", {"closed_by": "idle"}) == 1
    assert value("support_handoff_first_reply_seconds_count") == 1
    assert value("support_handoff_first_reply_seconds_sum") == 95.0
    assert value("support_handoff_first_reply_seconds_bucket", {"le": "60.0"}) == 0
    assert value("support_handoff_first_reply_seconds_bucket", {"le": "120.0"}) == 1
    assert value("support_tool_executions_total", {"tool": "unknown", "status": ""}) is None
    assert inner.fields == entries  # written through, once, in order
