"""``support-audit`` commands against a real redis-server, run in-process with ``main``."""

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest
import redis

from bot.audit.pseudonym import ChatPseudonymizer, chat_pseudonym
from bot.audit.stream import StreamEntry
from bot.support_audit.cli import main
from bot.support_audit.export import StreamExporter
from bot.testing.audit_entries import append, hours_ago, simple_turn, tool_entry, turn_entry
from bot.testing.redis_server import free_port
from tests.audit.conftest import HMAC_KEY, STREAM
from turn import ToolStatus, TurnOutcome

pytestmark = pytest.mark.usefixtures("cli_env")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], list[str]]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.splitlines()


def _json_lines(lines: list[str]) -> list[dict[str, str]]:
    return [json.loads(line) for line in lines]


def _incident(client: redis.Redis) -> list[str]:
    """A failed turn: a successful search, a timed-out order lookup, the turn entry."""
    started = datetime(2026, 12, 1, 9, 30, 5, tzinfo=UTC)
    return append(
        client,
        STREAM,
        [
            tool_entry(
                "K7M2QX9PAF",
                tool_name="search_products",
                duration_ms=8.25,
                started_at=started,
                call_id="call_a",
            ),
            tool_entry(
                "K7M2QX9PAF",
                tool_name="get_order_status",
                status=ToolStatus.TIMEOUT,
                error_code="timeout",
                duration_ms=2001.5,
                step=2,
                started_at=started + timedelta(seconds=1),
                call_id="call_b",
            ),
            turn_entry(
                "K7M2QX9PAF",
                outcome=TurnOutcome.TOOL_FAILURE,
                tool_names=("search_products", "get_order_status"),
                latency_ms=3500.0,
                total_tokens=None,
                model_steps=2,
            ),
        ],
    )


# ---------------------------------------------------------------- tail


def test_tail_prints_an_aligned_table_of_the_newest_entries(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    append(sync_redis, STREAM, simple_turn("OLDERTURN1"))
    _incident(sync_redis)

    status, out, err = _run(capsys, "tail", "-n", "3", "--utc")

    assert (status, err) == (0, [])
    header, *rows = out
    assert header.split() == [
        "TIME",
        "TYPE",
        "CHAT",
        "TURN",
        "STEP",
        "TOOL",
        "STATUS",
        "ERROR",
        "DURATION",
        "DETAILS",
    ]
    assert len(rows) == 3
    assert rows[0].startswith("2026-12-01 09:30:05  tool  100200300  K7M2QX9PAF  1")
    assert "timeout" in rows[1]
    assert "2.0 s" in rows[1]
    assert "tool_failure" in rows[2]
    assert "3.5 s" in rows[2]
    assert "tokens=?/?/?" in rows[2]
    # Aligned: every column starts at the header's offset on every row.
    for title, value_of in (
        ("STATUS", ["success", "timeout", "tool_failure"]),
        ("TOOL", ["search_products", "get_order_status", "search_products,get_order_status"]),
    ):
        offset = header.index(title)
        assert [row[offset:].split()[0] for row in rows] == value_of


def test_tail_json_gives_one_object_a_line_with_id_and_every_field(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _incident(sync_redis)

    status, out, _ = _run(capsys, "tail", "--json")

    assert status == 0
    objects = _json_lines(out)
    assert [obj["id"] for obj in objects] == ids
    assert objects[1]["status"] == "timeout"
    assert objects[2]["outcome"] == "tool_failure"
    assert objects[2]["total_tokens"] == ""


def test_tail_filters_by_tool_status_type_and_count(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    append(sync_redis, STREAM, simple_turn("FIRSTTURN1", tools=("search_products",)))
    _incident(sync_redis)
    append(sync_redis, STREAM, simple_turn("THIRDTURN1", tools=("get_support_hours",)))

    def turn_ids(*argv: str) -> list[tuple[str, str]]:
        status, out, _ = _run(capsys, "tail", "--json", *argv)
        assert status == 0
        return [(obj["turn_id"], obj["type"]) for obj in _json_lines(out)]

    assert turn_ids("--tool", "search_products", "--type", "tool") == [
        ("FIRSTTURN1", "tool"),
        ("K7M2QX9PAF", "tool"),
    ]
    assert turn_ids("--status", "timeout") == [("K7M2QX9PAF", "tool")]
    assert turn_ids("--status", "tool_failure") == [("K7M2QX9PAF", "turn")]
    assert turn_ids("--type", "turn", "-n", "2") == [("K7M2QX9PAF", "turn"), ("THIRDTURN1", "turn")]


def test_tail_since_skips_older_entries(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    append(sync_redis, STREAM, simple_turn("THREEHOURS"), at=hours_ago(3))
    append(sync_redis, STREAM, simple_turn("HALFANHOUR"), at=hours_ago(0.5))

    _, recent, _ = _run(capsys, "tail", "--json", "--since", "1h")
    iso = (datetime.now() - timedelta(hours=4)).strftime("%Y-%m-%dT%H:%M")
    _, both, _ = _run(capsys, "tail", "--json", "--since", iso)

    assert {obj["turn_id"] for obj in _json_lines(recent)} == {"HALFANHOUR"}
    assert {obj["turn_id"] for obj in _json_lines(both)} == {"THREEHOURS", "HALFANHOUR"}


def test_tail_chat_finds_a_pseudonymised_chat_by_its_real_id(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUDIT_PSEUDONYMIZE_CHAT_IDS", "true")
    monkeypatch.setenv("AUDIT_HMAC_KEY", HMAC_KEY)
    pseudonymize = ChatPseudonymizer(HMAC_KEY.encode())
    for chat in ("111111111", "222222222"):
        for entry in simple_turn(f"CHAT{chat[:6]}", chat_id=chat):
            fields = {**entry.to_fields(), "chat_id": pseudonymize(chat)}
            sync_redis.xadd(STREAM, fields)  # type: ignore[arg-type]

    _, by_real_id, _ = _run(capsys, "tail", "--json", "--chat", "222222222")
    _, by_pseudonym, _ = _run(
        capsys, "tail", "--json", "--chat", chat_pseudonym("222222222", HMAC_KEY.encode())
    )
    _, pseudonym_out, _ = _run(capsys, "pseudonym", "222222222")

    assert {obj["turn_id"] for obj in _json_lines(by_real_id)} == {"CHAT222222"}
    assert _json_lines(by_pseudonym) == _json_lines(by_real_id)
    assert pseudonym_out == [chat_pseudonym("222222222", HMAC_KEY.encode())]


# ---------------------------------------------------------------- turn


def test_turn_prints_every_entry_of_one_turn_in_order_and_its_summary(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    append(sync_redis, STREAM, simple_turn("BEFORE0001"))
    _incident(sync_redis)
    append(sync_redis, STREAM, simple_turn("AFTER00001"))

    status, out, err = _run(capsys, "turn", "k7m2qx9paf", "--utc")

    assert (status, err) == (0, [])
    table, summary = out[:4], out[5:]
    assert [line.split()[2:5] for line in table[1:]] == [
        ["tool", "100200300", "K7M2QX9PAF"],
        ["tool", "100200300", "K7M2QX9PAF"],
        ["turn", "100200300", "K7M2QX9PAF"],
    ]
    assert "outcome:           tool_failure" in summary
    assert "total_tokens:      -" in summary
    assert "tool_names:        search_products,get_order_status" in summary


def test_turn_finds_a_turn_among_many_others(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    """The newest-first search reads past many batches of other turns."""
    _incident(sync_redis)
    for index in range(400):
        append(sync_redis, STREAM, simple_turn(f"NOISE{index:05d}", tools=("a_tool", "b_tool")))

    status, out, _ = _run(capsys, "turn", "K7M2QX9PAF", "--json")

    assert status == 0
    assert [(obj["type"], obj.get("call_id")) for obj in _json_lines(out)] == [
        ("tool", "call_a"),
        ("tool", "call_b"),
        ("turn", None),
    ]


def test_turn_of_an_unknown_id_fails_with_one_line(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _incident(sync_redis)
    status, out, err = _run(capsys, "turn", "NOSUCHTURN")
    assert (status, out) == (1, [])
    assert len(err) == 1
    assert err[0].startswith(
        "support-audit: error: no entries for turn 'NOSUCHTURN' in 'support:audit' "
        "(mistyped, or older than the stream keeps"
    )


def test_turn_that_finds_nothing_says_where_else_to_look(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _incident(sync_redis)
    status, _, err = _run(capsys, "turn", "NOSUCHTURN")
    assert status == 1
    assert "if Redis was down then" in err[0]
    assert "the bot's log: grep it for 'audit stream' and NOSUCHTURN" in err[0]


@pytest.mark.parametrize(
    "pasted",
    [
        "Код обращения: K7M2QX9PAF",
        "Код обращения: K7M2QX9PAF.",
        "  k7m2qx9paf\n",
        "Не удалось ответить (код K7M2QX9PAF), попробуйте позже",
    ],
)
def test_turn_accepts_the_customers_pasted_text(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str], pasted: str
) -> None:
    _incident(sync_redis)
    status, out, err = _run(capsys, "turn", pasted, "--json")
    assert (status, err) == (0, [])
    assert {obj["turn_id"] for obj in _json_lines(out)} == {"K7M2QX9PAF"}


def test_table_mode_escapes_control_characters_from_the_stream(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    fields = turn_entry("K7M2QX9PAF").to_fields()
    fields["model"] = "gpt\x1b]0;pwned\x07\x1b[2J\u202eevil\r\nFAKE LINE"
    fields["outcome"] = "answered\x1b[31m"
    sync_redis.xadd(STREAM, fields)  # type: ignore[arg-type]

    for argv in (("tail",), ("turn", "K7M2QX9PAF"), ("stats",)):
        status, out, _ = _run(capsys, *argv)
        assert status == 0
        text = "\n".join(out)
        assert not any(char in text for char in "\x1b\x07\r\u202e")
        if argv[0] != "stats":
            assert "FAKE LINE" not in out  # never a line of its own
            assert "gpt\\x1b]0;pwned\\x07\\x1b[2J\\u202eevil\\r\\nFAKE LINE" in text
    # JSON lines escape by themselves and stay exact.
    _, out, _ = _run(capsys, "turn", "K7M2QX9PAF", "--json")
    assert json.loads(out[0])["model"] == fields["model"]


# ---------------------------------------------------------------- stats


def test_stats_count_statuses_rates_and_percentiles(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    append(sync_redis, STREAM, simple_turn("LASTWEEK01"), at=hours_ago(24 * 7))
    _incident(sync_redis)
    for index in range(3):
        append(sync_redis, STREAM, simple_turn(f"GOOD{index:06d}", tools=("get_order_status",)))

    status, out, _ = _run(capsys, "stats", "--json")
    status_table, table, _ = _run(capsys, "stats", "--since", "1h")

    assert status == status_table == 0
    assert len(out) == 1
    stats = json.loads(out[0])
    assert stats["entries"] == 3 + 3 * 2
    tools = {tool["tool_name"]: tool for tool in stats["tools"]}
    order = tools["get_order_status"]
    assert order["count"] == 4
    assert order["by_status"] == {"success": 3, "timeout": 1}
    assert order["error_rate"] == 0.25
    assert order["duration_ms"] == {"p50": 12.5, "p95": 2001.5, "max": 2001.5}
    assert stats["turns"]["by_outcome"] == {"answered": 3, "tool_failure": 1}
    assert stats["turns"]["latency_ms"]["p95"] == 3500.0
    assert stats["turns"]["total_tokens"] == {"p50": 900.0, "p95": 900.0, "max": 900.0}
    assert stats["turns"]["tokens_unknown"] == 1
    row = next(line for line in table if line.startswith("get_order_status"))
    assert row.split() == [
        "get_order_status",
        "4",
        "3",
        "0",
        "0",
        "1",
        "0",
        "25.0%",
        "12",
        "ms",
        "2.0",
        "s",
        "2.0",
        "s",
    ]
    assert "turns: 4 (answered 3, tool_failure 1)" in table


def test_stats_split_turns_by_language(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    for index, language in enumerate(("en", "en", "ru")):
        entry = dataclasses.replace(turn_entry(f"LANG{index:06d}"), language=language)
        append(sync_redis, STREAM, [entry])
    append(sync_redis, STREAM, [turn_entry("NOLANG0001", outcome=TurnOutcome.TOOL_FAILURE)])

    _, out, _ = _run(capsys, "stats", "--json")
    _, table, _ = _run(capsys, "stats")

    assert json.loads(out[0])["turns"]["by_language"] == {
        "en": {"answered": 2},
        "-": {"tool_failure": 1},
        "ru": {"answered": 1},
    }
    assert "languages: en 2 (answered 2), - 1 (tool_failure 1), ru 1 (answered 1)" in table


# ---------------------------------------------------------------- export


def test_export_writes_each_entry_once_across_runs(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    first_ids = _incident(sync_redis)
    _, first, _ = _run(capsys, "export", "--group", "siem")
    _, nothing_new, _ = _run(capsys, "export", "--group", "siem")
    later_ids = append(sync_redis, STREAM, simple_turn("LATERTURN1"))
    _, second, _ = _run(capsys, "export", "--group", "siem")

    assert [obj["id"] for obj in _json_lines(first)] == first_ids
    assert nothing_new == []
    assert [obj["id"] for obj in _json_lines(second)] == later_ids
    assert sync_redis.xpending(STREAM, "siem")["pending"] == 0


class _Crash(Exception):
    """The exporter's process dies here."""


def test_export_resumes_after_a_crash_without_losing_or_repeating_an_entry(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    """A consumer dies between receiving entries and writing them; the next run reclaims them."""
    all_ids = []
    for index in range(10):
        all_ids += append(sync_redis, STREAM, simple_turn(f"EXPORT{index:04d}"))
    exporter = StreamExporter(
        sync_redis, STREAM, group="siem", consumer="crashed", claim_idle_ms=0, batch_size=4
    )
    exporter.ensure_group()
    written: list[str] = []

    def emit_then_die(entry: StreamEntry) -> None:
        if len(written) == 6:
            raise _Crash
        written.append(entry.entry_id)

    with pytest.raises(_Crash):
        exporter.run(emit_then_die)
    # Entries 7 and 8 were delivered in the crashed batch and never acknowledged.
    assert sync_redis.xpending(STREAM, "siem")["pending"] == 2

    # Another exporter right away leaves them alone: the crashed one might still be working.
    _, too_early, _ = _run(capsys, "export", "--group", "siem", "--consumer", "next")
    assert [obj["id"] for obj in _json_lines(too_early)] == all_ids[8:]
    _, reclaimed, _ = _run(
        capsys, "export", "--group", "siem", "--consumer", "next", "--claim-idle-ms", "0"
    )

    assert [obj["id"] for obj in _json_lines(reclaimed)] == all_ids[6:8]
    union = written + [obj["id"] for obj in _json_lines(too_early) + _json_lines(reclaimed)]
    assert sorted(union) == sorted(all_ids)
    assert len(union) == len(set(union)) == 20
    assert sync_redis.xpending(STREAM, "siem")["pending"] == 0


def test_export_skips_pending_entries_trimmed_while_the_exporter_was_down(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = append(
        sync_redis, STREAM, simple_turn("TRIMMED001", tools=("a_tool", "b_tool", "c_tool"))
    )
    exporter = StreamExporter(
        sync_redis, STREAM, group="siem", consumer="crashed", claim_idle_ms=0, batch_size=4
    )
    exporter.ensure_group()

    def die(entry: StreamEntry) -> None:
        raise _Crash

    with pytest.raises(_Crash):
        exporter.run(die)
    sync_redis.xdel(STREAM, ids[0], ids[1])

    _, out, err = _run(capsys, "export", "--group", "siem", "--claim-idle-ms", "0")

    assert err == []
    assert [obj["id"] for obj in _json_lines(out)] == ids[2:]
    assert sync_redis.xpending(STREAM, "siem")["pending"] == 0


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize(
    "argv",
    [
        ["tail"],
        ["tail", "--follow"],
        ["turn", "K7M2QX9PAF"],
        ["stats"],
        ["export", "--group", "siem"],
    ],
)
def test_every_command_fails_in_one_line_when_the_stream_does_not_exist(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    status, out, err = _run(capsys, *argv)
    assert (status, out) == (1, [])
    assert err == [
        "support-audit: error: audit stream 'support:audit' does not exist (nothing audited yet, "
        "or AUDIT_STREAM / the REDIS_URL database is not the bot's)"
    ]
    assert not sync_redis.exists(STREAM)


@pytest.mark.parametrize(
    "argv", [["tail"], ["turn", "K7M2QX9PAF"], ["stats"], ["export", "--group", "siem"]]
)
def test_every_command_fails_in_one_line_when_redis_is_unreachable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    port = free_port()
    monkeypatch.setenv("REDIS_URL", f"redis://:hunter2@127.0.0.1:{port}/0")
    status, out, err = _run(capsys, *argv)
    assert (status, out) == (1, [])
    assert len(err) == 1
    assert err[0].startswith(
        f"support-audit: error: cannot reach Redis at redis://:***@127.0.0.1:{port}/0: "
    )
    assert "hunter2" not in err[0]


def test_a_key_that_is_not_a_stream_is_named_in_one_line(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    sync_redis.set(STREAM, "x")
    status, _, err = _run(capsys, "tail")
    assert status == 1
    assert err == [
        "support-audit: error: key 'support:audit' is a string, not a stream: check AUDIT_STREAM"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: command"),
        (["tail", "-n", "0"], "argument -n: 0 is not a positive number"),
        (["tail", "--type", "model"], "argument --type: invalid choice: 'model'"),
        (["export"], "the following arguments are required: --group"),
        (["frobnicate"], "argument command: invalid choice: 'frobnicate'"),
    ],
)
def test_bad_arguments_fail_in_one_line_with_status_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, out, err = _run(capsys, *argv)
    assert (status, out) == (2, [])
    assert len(err) == 1
    assert err[0].startswith(f"support-audit: error: {message}")
    assert err[0].endswith("(see support-audit --help)")


def test_a_bad_since_fails_in_one_line(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _incident(sync_redis)
    status, _, err = _run(capsys, "stats", "--since", "last tuesday")
    assert status == 1
    assert len(err) == 1
    assert "--since 'last tuesday'" in err[0]


def test_bad_settings_fail_in_one_line_without_needing_bot_or_model_settings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("AUDIT_PSEUDONYMIZE_CHAT_IDS", "true")
    status, _, err = _run(capsys, "tail")
    assert status == 2
    assert err == [
        "support-audit: error: bad settings: Value error, AUDIT_PSEUDONYMIZE_CHAT_IDS=true "
        "needs AUDIT_HMAC_KEY of at least 16 characters"
    ]


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "--help")
    assert status == 0
    assert any("tail" in line and "turn" in line and "export" in line for line in out)


@pytest.mark.parametrize("position", ["after", "before"])
def test_export_takes_utc_before_or_after_the_command_and_writes_utc(
    sync_redis: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    position: str,
) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    ids = _incident(sync_redis)
    argv = ["export", "--group", "siem", "--utc"]
    if position == "before":
        argv = ["--utc", "--stream", STREAM, "export", "--group", "siem"]

    status, out, err = _run(capsys, *argv)

    assert (status, err) == (0, [])
    objects = _json_lines(out)
    assert [obj["id"] for obj in objects] == ids
    assert all(obj["recorded_at"].endswith("+00:00") for obj in objects)


def test_utc_before_the_command_applies_to_the_table(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    sync_redis.xadd(STREAM, turn_entry("K7M2QX9PAF").to_fields(), id="1796280511000-0")  # type: ignore[arg-type]
    _, after, _ = _run(capsys, "tail", "--utc")
    _, before, _ = _run(capsys, "--utc", "tail")
    assert after == before
    assert after[1].startswith("2026-12-03 06:48:31")


def test_export_help_says_json_times_are_utc(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "export", "--help")
    assert status == 0
    assert "always UTC" in " ".join(" ".join(out).split())


@pytest.mark.parametrize("key", ["short", "fifteen-chars!!"])
def test_pseudonym_refuses_a_key_shorter_than_16_characters(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv("AUDIT_HMAC_KEY", key)
    status, out, err = _run(capsys, "pseudonym", "100200300")
    assert (status, out) == (2, [])
    assert err == ["support-audit: error: AUDIT_HMAC_KEY must be at least 16 characters"]


def test_pseudonym_with_a_16_character_key_prints_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUDIT_HMAC_KEY", "sixteen-chars!!!")
    status, out, _ = _run(capsys, "pseudonym", "100200300")
    assert status == 0
    assert out == [chat_pseudonym("100200300", b"sixteen-chars!!!")]
