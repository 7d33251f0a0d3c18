"""The audit index: lookups that read only what they show, rollups, retention, nothing found.

Entries are written by the sink's own write-once script (with the index); the
commands Redis ran are counted with ``INFO commandstats``, so a lookup that
reads the stream from end to end cannot pass.
"""

import json
import time

import pytest
import redis

from bot.audit.index import CHAT_TURNS_KEPT, TRIM_EVERY_ENTRIES, write_once
from bot.audit.schema import HandoffAuditEntry
from bot.storage.keys import RedisKeys
from bot.support_audit.cli import main
from bot.testing.audit_entries import append_indexed, simple_turn, tool_entry, turn_entry
from tests.audit.conftest import STREAM
from turn import ToolStatus, TurnOutcome

pytestmark = pytest.mark.usefixtures("cli_env")

OTHERS = 1500
INDEX = RedisKeys.audit_index(STREAM)


def _turn(client: redis.Redis, turn_id: str, chat: str = "100200300", **kwargs: object) -> None:
    rows = [entry.to_fields() for entry in simple_turn(turn_id, chat_id=chat, **kwargs)]  # type: ignore[arg-type]
    assert append_indexed(client, STREAM, rows)


def _many(client: redis.Redis, count: int, chat: str = "777") -> None:
    pipe = client.pipeline(transaction=False)
    for number in range(count):
        turn_id = f"N{number:09d}"
        rows = [entry.to_fields() for entry in simple_turn(turn_id, chat_id=chat)]
        call = write_once(
            INDEX, STREAM, RedisKeys.audit_done(STREAM, turn_id), rows,
            maxlen=1_000_000, done_ttl_seconds=3600,
        )  # fmt: skip
        keys = call.keys()
        pipe.eval(call.SOURCE, len(keys), *keys, *call.args())
    pipe.execute()


def _calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}


def _reads_of_the_stream(client: redis.Redis) -> tuple[int, int]:
    """XRANGE calls (one per entry shown is fine) and XREVRANGE calls (a scan)."""
    calls = _calls(client)
    return calls.get("xrange", 0), calls.get("xrevrange", 0)


def test_turn_reads_only_its_own_entries_among_many_others(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _turn(sync_redis, "K7M2QX9PAF", tools=("get_order_status", "search_help_center"))
    _many(sync_redis, OTHERS)
    sync_redis.config_resetstat()

    assert main(["turn", "K7M2QX9PAF", "--json"]) == 0

    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["type"], r["turn_id"]) for r in rows] == [
        ("tool", "K7M2QX9PAF"),
        ("tool", "K7M2QX9PAF"),
        ("turn", "K7M2QX9PAF"),
    ]
    xrange_calls, xrevrange_calls = _reads_of_the_stream(sync_redis)
    assert xrevrange_calls == 0
    assert xrange_calls <= 3 + 1


def test_an_unknown_turn_is_not_found_without_reading_the_stream(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _many(sync_redis, OTHERS)
    sync_redis.config_resetstat()

    assert main(["turn", "ZZZZZZZZZZ"]) == 1

    assert "no entries for turn 'ZZZZZZZZZZ'" in capsys.readouterr().err
    xrange_calls, xrevrange_calls = _reads_of_the_stream(sync_redis)
    assert (xrange_calls <= 1, xrevrange_calls) == (True, 0)


def test_tail_chat_reads_the_chats_turns_only(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _turn(sync_redis, "CHAT1TURN2", chat="4242")
    _many(sync_redis, OTHERS)
    _turn(sync_redis, "CHAT1TURN3", chat="4242")
    sync_redis.config_resetstat()

    assert main(["tail", "--chat", "4242", "--json"]) == 0

    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["turn_id"] for r in rows] == ["CHAT1TURN2"] * 2 + ["CHAT1TURN3"] * 2
    xrange_calls, xrevrange_calls = _reads_of_the_stream(sync_redis)
    assert xrevrange_calls <= 1  # the newest id, for --follow
    assert xrange_calls <= 4 + 1


@pytest.mark.parametrize(
    "arguments",
    [
        ["tail", "--chat", "999999"],
        ["tail", "--tool", "no_such_tool"],
        ["tail", "--status", "no_such_status"],
        ["tail", "--chat", "999999", "--json"],
    ],
)
def test_a_filter_that_matches_nothing_says_so_in_one_line_and_exits_1(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str], arguments: list[str]
) -> None:
    _turn(sync_redis, "K7M2QX9PAF")
    _many(sync_redis, OTHERS)
    sync_redis.config_resetstat()

    assert main(arguments) == 1

    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1
    assert "nothing found" in captured.err
    assert _reads_of_the_stream(sync_redis)[1] <= 1


def test_stats_come_from_the_rollups(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        tool_entry("STATS00001", status=ToolStatus.TIMEOUT, duration_ms=100.0).to_fields(),
        tool_entry("STATS00001", tool_name="search_help_center", duration_ms=30.0).to_fields()
        | {"result_count": "0", "top_result": ""},
        turn_entry("STATS00001", outcome=TurnOutcome.MODEL_ERROR, latency_ms=2000.0)
        .to_fields(),
    ]  # fmt: skip
    assert append_indexed(sync_redis, STREAM, rows)
    handoff = HandoffAuditEntry(chat_id="5", turn_id="STATS00002", event="opened", trigger="tool")
    assert append_indexed(sync_redis, STREAM, [handoff.to_fields()])
    _many(sync_redis, OTHERS)
    sync_redis.config_resetstat()

    assert main(["stats", "--json"]) == 0

    report = json.loads(capsys.readouterr().out)
    assert report["entries"] == 4 + 2 * OTHERS
    tools = {tool["tool_name"]: tool for tool in report["tools"]}
    assert tools["get_order_status"]["count"] == 1 + OTHERS
    assert tools["get_order_status"]["by_status"] == {"timeout": 1, "success": OTHERS}
    assert tools["get_order_status"]["duration_ms"]["max"] == 100.0
    # A fixed bucket: within 10% above the true 12.5 ms.
    assert 12.5 <= tools["get_order_status"]["duration_ms"]["p50"] <= 12.5 * 1.1
    assert report["turns"]["by_outcome"] == {"answered": OTHERS, "model_error": 1}
    assert report["knowledge"] == {"searches": 1, "empty": 1, "empty_rate": 1.0}
    assert report["handoffs"]["opened"] == 1
    assert report["handoffs"]["chats"] == 2  # 100200300 and 777 had turns
    xrange_calls, xrevrange_calls = _reads_of_the_stream(sync_redis)
    assert (xrange_calls <= 1, xrevrange_calls) == (True, 0)


def test_a_repeated_write_changes_neither_the_stream_nor_the_rollups(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [entry.to_fields() for entry in simple_turn("TWICE00001")]
    assert append_indexed(sync_redis, STREAM, rows)
    assert not append_indexed(sync_redis, STREAM, rows)

    assert main(["stats", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sync_redis.xlen(STREAM) == 2
    assert report["entries"] == 2
    assert report["turns"]["count"] == 1
    assert report["tools"][0]["count"] == 1
    assert sync_redis.hget(INDEX.chats, "100200300") == "TWICE00001"


def test_the_index_forgets_what_the_stream_no_longer_holds(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _turn(sync_redis, "OLDTURN001", chat="1", tools=("get_return_policy",))
    _turn(sync_redis, "OLDTURN002", chat="2")
    time.sleep(0.005)
    _turn(sync_redis, "KEPTTURN01", chat="2")
    # A minute long gone from the stream, and a name last seen in it, as an older write left them.
    sync_redis.zadd(INDEX.minutes, {"1": 1})
    sync_redis.hset(INDEX.minute(1), "entries", "5")
    sync_redis.hset(INDEX.names, "tool:gone_tool", "60001")
    kept_id = (sync_redis.xrange(STREAM) or [])[4][0]
    sync_redis.xtrim(STREAM, minid=kept_id, approximate=False)

    _turn(sync_redis, "NEXTTURN01", chat="3")
    # Ordered by millisecond: the next turns come after (a tie would order them by id).
    time.sleep(0.005)
    # The index is trimmed when a minute opens and every TRIM_EVERY_ENTRIES entries of one.
    for number in range(TRIM_EVERY_ENTRIES):
        if not sync_redis.hexists(INDEX.turns, "OLDTURN001"):
            break
        _turn(sync_redis, f"FILL{number:06d}", chat="3")

    turns = set(sync_redis.hkeys(INDEX.turns))
    assert {"OLDTURN001", "OLDTURN002"}.isdisjoint(turns)
    assert {"KEPTTURN01", "NEXTTURN01"} <= turns
    assert sync_redis.zrange(INDEX.order, 0, 1) == ["KEPTTURN01", "NEXTTURN01"]
    assert sync_redis.hget(INDEX.chats, "1") is None
    assert sync_redis.hget(INDEX.chats, "2") == "KEPTTURN01"
    assert sync_redis.exists(INDEX.minute(1)) == 0
    assert "1" not in sync_redis.zrange(INDEX.minutes, 0, -1)
    # Names are kept while last seen (to the end of its minute) at or after the first
    # kept entry: one of the stream's current minute stays until that minute goes.
    assert sync_redis.hget(INDEX.names, "tool:gone_tool") is None
    assert sync_redis.hget(INDEX.names, "tool:get_order_status") is not None
    last_seen = int(sync_redis.hget(INDEX.names, "tool:get_return_policy") or 0)
    assert last_seen >= int(str(kept_id).split("-")[0])
    assert last_seen % 60_000 == 59_999
    # The filter finds nothing all the same (the stream is read, not only the names).
    assert main(["tail", "--tool", "get_return_policy"]) == 1
    assert "nothing found" in capsys.readouterr().err


def test_a_chat_names_its_newest_turns_only(sync_redis: redis.Redis) -> None:
    for number in range(CHAT_TURNS_KEPT + 5):
        _turn(sync_redis, f"C{number:09d}", chat="9")

    listed = str(sync_redis.hget(INDEX.chats, "9")).split(",")
    assert len(listed) == CHAT_TURNS_KEPT
    assert listed[0] == f"C{CHAT_TURNS_KEPT + 4:09d}"


def test_nothing_in_the_index_holds_text_or_arguments(sync_redis: redis.Redis) -> None:
    rows = [entry.to_fields() for entry in simple_turn("PRIVATE001", chat_id="55")]
    rows[-1]["model"] = "SECRET-MODEL-TEXT"
    rows[0]["call_id"] = "SECRET-CALL"
    assert append_indexed(sync_redis, STREAM, rows)

    dumped = ""
    for key in sync_redis.scan_iter(f"{{{STREAM}}}:index*"):
        kind = sync_redis.type(key)
        if kind == "hash":
            dumped += json.dumps(sync_redis.hgetall(key))
        elif kind == "zset":
            dumped += json.dumps(sync_redis.zrange(key, 0, -1))
        elif kind == "string" and not key.endswith(":c"):
            dumped += str(sync_redis.get(key))
    assert "SECRET" not in dumped
    assert "PRIVATE001" in dumped


def test_handoffs_read_the_open_set_and_the_chats_index_not_the_stream(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAFF_CHAT_ID", "-1001")
    keys = RedisKeys("support")

    def step(chat: str, turn_id: str, event: str, **fields: object) -> None:
        entry = HandoffAuditEntry(chat_id=chat, turn_id=turn_id, event=event, **fields)  # type: ignore[arg-type]
        assert append_indexed(sync_redis, STREAM, [entry.to_fields()])

    step("111", "HANDOFF001", "opened", trigger="command")
    step("222", "HANDOFF002", "opened", trigger="tool", reason="complaint")
    step("222", "HANDOFF003", "first_reply", wait_ms=42000.0)
    # Open in the stream but closed by the bot's own set: not listed.
    step("333", "HANDOFF004", "opened", trigger="staff")
    _many(sync_redis, OTHERS)
    sync_redis.zadd(keys.open_handoffs(-1001), {"tg:111": 1, "tg:222": 2})
    sync_redis.hset(keys.conversation("tg:111").session, "h", "waiting")
    sync_redis.hset(keys.conversation("tg:222").session, "h", "human")
    sync_redis.config_resetstat()

    assert main(["handoffs", "--json"]) == 0

    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["chat_id"], r["state"], r["trigger"], r["reason"]) for r in rows] == [
        ("111", "waiting", "command", ""),
        ("222", "human", "tool", "complaint"),
    ]
    assert rows[0]["waiting_seconds"] >= 0
    assert rows[1]["waiting_seconds"] == 42.0
    xrange_calls, xrevrange_calls = _reads_of_the_stream(sync_redis)
    assert xrevrange_calls == 0
    assert xrange_calls <= 3 + 1


def test_a_stream_older_than_its_index_is_read_only_where_the_index_does_not_reach(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    # Written by a version without the index: plain XADDs.
    for entry in simple_turn("BEFOREIDX1"):
        sync_redis.xadd(STREAM, entry.to_fields())  # type: ignore[arg-type]
    _many(sync_redis, OTHERS)
    sync_redis.config_resetstat()

    assert main(["turn", "BEFOREIDX1", "--json"]) == 0
    assert main(["turn", "ZZZZZZZZZZ"]) == 1

    found = [json.loads(line)["turn_id"] for line in capsys.readouterr().out.splitlines()]
    assert found == ["BEFOREIDX1", "BEFOREIDX1"]
    # Two short reads of the two entries before the index, not of the 3,000 after it.
    assert _calls(sync_redis).get("xrevrange", 0) <= 2
