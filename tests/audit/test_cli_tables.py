"""Tables that fit the terminal, readable durations, colour only on a terminal."""

import io
import json
import re
import sys

import pytest
import redis

from bot.audit.schema import HandoffAuditEntry
from bot.support_audit.cli import main
from bot.testing.audit_entries import append_indexed, simple_turn, tool_entry, turn_entry
from tests.audit.conftest import STREAM
from turn import ToolStatus, TurnOutcome

pytestmark = pytest.mark.usefixtures("cli_env")

ESC = "\x1b["


class _Terminal(io.StringIO):
    """Standard output as a terminal would be (``isatty``)."""

    def isatty(self) -> bool:
        return True


def _fill(client: redis.Redis) -> None:
    tools = ("get_order_status", "search_help_center", "create_return_request_for_order")
    rows = [e.to_fields() for e in simple_turn("LONGTURN01", chat_id="-1001234567890", tools=tools)]
    assert append_indexed(client, STREAM, rows)
    failed = [
        tool_entry("FAILTURN01", status=ToolStatus.TECHNICAL_ERROR, error_code="upstream_5xx")
        .to_fields(),
        turn_entry("FAILTURN01", outcome=TurnOutcome.TOOL_FAILURE, latency_ms=864.0).to_fields(),
    ]  # fmt: skip
    assert append_indexed(client, STREAM, failed)
    handoff = HandoffAuditEntry(
        chat_id="100200300", turn_id="HANDOFF001", event="opened", trigger="tool", reason="refund"
    )
    assert append_indexed(client, STREAM, [handoff.to_fields()])


def _words(line: str) -> list[str]:
    """Words, lists broken at their commas as the detail view may break them."""
    return [word for word in re.split(r"[\s,]+", line) if word]


def _output(capsys: pytest.CaptureFixture[str], *arguments: str) -> list[str]:
    assert main(list(arguments)) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize(
    "command", [["tail", "--utc"], ["stats"], ["turn", "LONGTURN01"], ["handoffs"]]
)
def test_tables_fit_the_width_without_cutting_a_word_across_lines(
    sync_redis: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    width: int,
    command: list[str],
) -> None:
    _fill(sync_redis)
    wide = _output(capsys, *command)
    monkeypatch.setenv("COLUMNS", str(width))

    narrow = _output(capsys, *command)

    assert max(len(line) for line in narrow) <= width
    # The wait of an open handoff grows between the two runs: its words are not compared.
    words = {word for line in wide for word in _words(line)}
    for line in narrow if command != ["handoffs"] else []:
        if line.startswith("since "):
            # The period starts a day before now: its second may tick between the two runs.
            continue
        for word in _words(line):
            # A word is whole, or visibly shortened: never its other half on the next line.
            assert word in words or word.endswith("…"), (word, line)
    if command[0] == "tail":
        header = narrow[0].split()
        assert {"TURN", "STATUS", "CHAT"} <= set(header)
        assert any("FAILTURN01" in line and "tool_failure" in line for line in narrow)


def test_without_a_width_a_pipe_gets_whole_rows(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    _fill(sync_redis)

    lines = _output(capsys, "tail")

    assert lines[0].split()[-1] == "DETAILS"
    assert "…" not in "".join(lines)


def test_handoff_rows_show_event_trigger_and_reason(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(sync_redis)

    row = _output(capsys, "tail", "--type", "handoff")[1]

    assert "opened" in row
    assert "trigger=tool" in row
    assert "reason=refund" in row


def test_durations_are_readable(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAFF_CHAT_ID", "-1001")
    _fill(sync_redis)
    long_ago = HandoffAuditEntry(
        chat_id="5", turn_id="HANDOFF002", event="first_reply", wait_ms=7_380_000.0
    )
    assert append_indexed(sync_redis, STREAM, [long_ago.to_fields()])
    sync_redis.zadd("support:{staff:-1001}:open", {"tg:5": 1})
    sync_redis.hset("support:{tg:5}:session", "h", "human")

    tail = "\n".join(_output(capsys, "tail"))
    handoffs = _output(capsys, "handoffs")

    assert "864 ms" in tail
    assert "wait=2h 03m" in tail
    assert "2h 03m" in handoffs[1]
    assert handoffs[0].index("WAITED") + len("WAITED") == handoffs[1].index("2h 03m") + 6


@pytest.mark.parametrize("no_color", [None, "1"])
def test_colour_marks_statuses_on_a_terminal_only_and_never_with_no_color(
    sync_redis: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_color: str | None,
) -> None:
    _fill(sync_redis)
    piped = "\n".join(_output(capsys, "tail"))
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)

    assert main(["tail"]) == 0
    assert main(["tail", "--json"]) == 0

    shown = terminal.getvalue()
    assert ESC not in piped
    table, *json_lines = shown.split("\n{")
    assert all(ESC not in line for line in json_lines)
    json.loads("{" + json_lines[0].splitlines()[0])
    if no_color is None:
        assert f"{ESC}31mtool_failure" in table
        assert f"{ESC}32msuccess" in table
        assert f"{ESC}" not in table.splitlines()[0]
    else:
        assert ESC not in table
