"""Pure parts of reading the stream: time ranges, filters, percentiles, stats."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from bot.audit.stats import compute_stats, percentile
from bot.audit.stream import (
    EntryFilter,
    StreamEntry,
    parse_entries,
    parse_read_reply,
    stream_id_at,
    stream_id_time,
)
from bot.support_audit.time_spec import TimeSpecError, parse_since

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _tool(status: str, duration: str, name: str = "get_order_status", **extra: str) -> StreamEntry:
    fields = {"type": "tool", "tool_name": name, "status": status, "duration_ms": duration}
    return StreamEntry("1-0", {**fields, **extra})


def _turn(outcome: str, latency: str, tokens: str, **extra: str) -> StreamEntry:
    fields = {"type": "turn", "outcome": outcome, "latency_ms": latency, "total_tokens": tokens}
    return StreamEntry("2-0", {**fields, **extra})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("45s", NOW - timedelta(seconds=45)),
        ("15m", NOW - timedelta(minutes=15)),
        ("1h", NOW - timedelta(hours=1)),
        ("2d", NOW - timedelta(days=2)),
        ("1w", NOW - timedelta(weeks=1)),
        ("2026-12-01T09:30:00+03:00", datetime(2026, 12, 1, 6, 30, tzinfo=UTC)),
        ("2026-12-01T09:30:00Z", datetime(2026, 12, 1, 9, 30, tzinfo=UTC)),
    ],
)
def test_since_accepts_durations_and_iso_times(text: str, expected: datetime) -> None:
    assert parse_since(text, NOW) == expected


def test_since_reads_an_iso_time_without_offset_as_local_time() -> None:
    local = datetime(2026, 12, 1, 9, 30).astimezone()
    assert parse_since("2026-12-01T09:30", NOW) == local.astimezone(UTC)


@pytest.mark.parametrize("text", ["yesterday", "1y", "-1h", "", "12:00 tomorrow"])
def test_since_rejects_anything_else_with_a_hint(text: str) -> None:
    with pytest.raises(TimeSpecError, match="15m, 1h"):
        parse_since(text, NOW)


def test_stream_ids_round_trip_to_the_millisecond() -> None:
    moment = datetime(2026, 12, 1, 9, 30, 0, 123000, tzinfo=UTC)
    entry_id = stream_id_at(moment)
    assert entry_id == f"{int(moment.timestamp() * 1000)}-0"
    assert stream_id_time(entry_id) == moment
    assert stream_id_at(moment.astimezone(timezone(timedelta(hours=3)))) == entry_id


def test_filter_matches_chat_tool_status_and_type() -> None:
    tool = _tool("timeout", "5", name="search_products", chat_id="7")
    turn = _turn("tool_failure", "9", "", chat_id="7", tool_names="search_products,x")
    assert EntryFilter().matches(tool)
    assert EntryFilter(chat_ids=frozenset({"7", "h:0"})).matches(tool)
    assert not EntryFilter(chat_ids=frozenset({"8"})).matches(tool)
    assert EntryFilter(tool="search_products").matches(tool)
    assert EntryFilter(tool="search_products").matches(turn)
    assert not EntryFilter(tool="get_order_status").matches(turn)
    assert EntryFilter(status="timeout").matches(tool)
    assert EntryFilter(status="tool_failure").matches(turn)
    assert not EntryFilter(status="timeout").matches(turn)
    assert EntryFilter(entry_type="turn").matches(turn)
    assert not EntryFilter(entry_type="turn").matches(tool)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.95) == 95.0
    assert percentile([3.0], 0.95) == 3.0
    assert percentile([], 0.5) is None


def test_stats_count_statuses_error_rate_and_durations_per_tool() -> None:
    entries = [
        _tool("success", "10"),
        _tool("success", "20"),
        _tool("business_error", "30"),
        _tool("timeout", "2000"),
        _tool("technical_error", "not a number"),
        _tool("success", "5", name="search_products"),
    ]
    stats = compute_stats(entries)
    order, search = stats.tools
    assert order.tool_name == "get_order_status"
    assert order.count == 5
    assert order.by_status == {
        "success": 2,
        "business_error": 1,
        "timeout": 1,
        "technical_error": 1,
    }
    # Business errors are answers; timeouts and technical errors are failures.
    assert order.error_rate == pytest.approx(2 / 5)
    assert (order.duration_ms.p50, order.duration_ms.p95, order.duration_ms.max) == (
        20.0,
        2000.0,
        2000.0,
    )
    assert search.count == 1
    assert search.error_rate == 0.0


def test_stats_of_turns_count_outcomes_latency_and_known_tokens() -> None:
    entries = [
        _turn("answered", "1000", "800"),
        _turn("answered", "3000", "1200"),
        _turn("model_unavailable", "30000", ""),
    ]
    turns = compute_stats(entries).turns
    assert turns.count == 3
    assert turns.by_outcome == {"answered": 2, "model_unavailable": 1}
    assert (turns.latency_ms.p50, turns.latency_ms.p95) == (3000.0, 30000.0)
    assert (turns.total_tokens.p50, turns.total_tokens.p95) == (800.0, 1200.0)
    assert turns.tokens_sum == 2000
    assert turns.tokens_unknown == 1


def test_stats_split_turns_by_the_conversations_language() -> None:
    entries = [
        _turn("answered", "1000", "800", language="en"),
        _turn("answered", "1000", "800", language="ru"),
        _turn("model_unavailable", "1000", "800", language="ru"),
        _turn("answered", "1000", "800"),
    ]
    turns = compute_stats(entries).turns
    # The most turns first; "-" for entries written before languages were recorded.
    assert list(turns.by_language.items()) == [
        ("ru", {"answered": 1, "model_unavailable": 1}),
        ("-", {"answered": 1}),
        ("en", {"answered": 1}),
    ]


def test_replies_parse_in_both_protocol_shapes_and_skip_trimmed_ids() -> None:
    items = [("1-0", {"type": "tool"}), ("2-0", None)]
    assert [e.entry_id for e in parse_entries(items)] == ["1-0"]
    assert [e.entry_id for e in parse_read_reply([["s", items], ["other", items]], "s")] == ["1-0"]
    assert [e.entry_id for e in parse_read_reply({"s": [items]}, "s")] == ["1-0"]
    assert parse_read_reply(None, "s") == []
