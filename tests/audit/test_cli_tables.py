"""Tables that fit the terminal, readable durations, colour only on a terminal.

Every table command of the staff CLI prints through one renderer
(``bot.support_audit.table.render``); here each one runs over a real Redis with a
generated audit stream at 80 and 120 columns: it fits, its headers line up with its
values, no row is lost, and ``stats`` keeps every status count.
"""

import dataclasses
import io
import json
import random
import re
import sys

import pytest
import redis

from bot.audit.actions import ActionAuditEntry
from bot.audit.schema import AuditEntry, HandoffAuditEntry
from bot.queue.dead_letters import DeadLetter
from bot.storage.keys import RedisKeys
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
    # Short titles are explained in the legend under the table (its own lines, in brackets).
    words |= set(_legend(narrow))
    for line in narrow if command != ["handoffs"] else []:
        if line.startswith(("since ", "(")):
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


# --- every table command over a generated stream, at 80 and 120 columns ----------------

PREFIX = "tables"
TOOLS = (
    "get_order_status",
    "search_help_center",
    "get_return_policy",
    "create_return_request_for_order",
)
TABLE_COMMANDS = {
    "tail": (["tail", "-n", "60", "--utc"], "TIME"),
    "turn": (["turn", "GENTURN007", "--utc"], "TIME"),
    "stats": (["stats"], "TOOL"),
    "handoffs": (["handoffs"], "CHAT"),
    "knowledge-gaps": (["knowledge-gaps"], "TIME"),
    "actions": (["actions"], "TIME"),
    "dead-letters": (["dead-letters"], "GIVEN UP"),
}


def _generated(client: redis.Redis) -> None:
    """A busy day: every tool status, long names, searches, actions, handoffs, dead letters."""
    rng = random.Random(33)
    statuses = list(ToolStatus)
    for number in range(40):
        turn_id = f"GENTURN{number:03d}"
        chat = str(rng.choice([42, 100200300, -1001234567890, 5550001112223]))
        names = tuple(rng.sample(TOOLS, rng.randint(1, 3)))
        if number % 3 == 0 and "search_help_center" not in names:
            names = ("search_help_center", *names)
        entries: list[AuditEntry] = []
        for step, name in enumerate(names, start=1):
            status = statuses[(number + step) % len(statuses)]
            entry = tool_entry(
                turn_id,
                chat_id=chat,
                tool_name=name,
                status=status,
                error_code=None if status is ToolStatus.SUCCESS else f"{status.value}_code",
                duration_ms=rng.choice([0.4, 3.8, 864.0, 2001.7, 31_000.0]),
                step=step,
                call_id=f"call_{turn_id}_{step}",
            )
            if name == "search_help_center":
                # Every third turn's search found nothing: a knowledge gap.
                entry = dataclasses.replace(entry, result_count=0 if number % 3 == 0 else 2)
            entries.append(entry)
        entries.append(
            turn_entry(turn_id, chat_id=chat, tool_names=names, latency_ms=rng.uniform(300, 9000))
        )
        assert append_indexed(client, STREAM, [e.to_fields() for e in entries])
    for number, event in enumerate(("proposed", "confirmed", "executed", "proposed", "expired")):
        action = ActionAuditEntry(
            chat_id="-1001234567890",
            turn_id="GENTURN001",
            event=event,
            action_id=f"act-{number // 3:04d}-0f3c9a",
            tool_name="create_return_request_for_order",
            decide_ms=4000.0 if event == "confirmed" else None,
            duration_ms=3.5 if event == "executed" else None,
            error_code="expired" if event == "expired" else "",
        )
        client.xadd(STREAM, action.to_fields())  # type: ignore[arg-type]
    for chat in ("100200300", "5550001112223"):
        opened = HandoffAuditEntry(
            chat_id=chat, turn_id="GENTURN002", event="opened", trigger="tool", reason="refund"
        )
        client.xadd(STREAM, opened.to_fields())  # type: ignore[arg-type]
    keys = RedisKeys(PREFIX)
    for number in range(3):
        letter = DeadLetter(
            turn_id=f"DEADTURN0{number}",
            update_id=900_000_000 + number,
            job_id=str(number),
            attempts=3 + number,
            error="RuntimeError: the model client failed while streaming a long answer",
            given_up_ms=1_796_000_000_000 + number * 1000,
            enqueued_ms=1_795_999_000_000,
        )
        client.hset(keys.dead_letters, letter.turn_id, letter.model_dump_json())
        client.zadd(keys.dead_letter_order, {letter.turn_id: letter.given_up_ms})


def _tables(lines: list[str], first_title: str) -> list[list[str]]:
    """The table blocks of an output: a header line, then its rows up to a blank or a legend."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in lines:
        if line.startswith(first_title + " "):
            current = [line]
            blocks.append(current)
        elif current is not None and line and not line.startswith("("):
            current.append(line)
        else:
            current = None
    return blocks


def _titles(header: str) -> list[tuple[int, int]]:
    """Each header title's span (titles are two spaces or more apart)."""
    return [match.span() for match in re.finditer(r"\S+(?: \S+)*", header)]


def _assert_lined_up(block: list[str]) -> None:
    """Every title sits over its own column: the gutters (two blanks in every line) part them."""
    header = block[0]
    gutter = [all(pos >= len(line) or line[pos] == " " for line in block) for pos in
              range(len(header))]  # fmt: skip
    # Columns are two spaces apart; one space inside a cell ("4.0 s") is part of it.
    mask = "".join("G" if g else "F" for g in gutter)
    segments = [m.span() for m in re.finditer(r"F(?:F|G(?=F))*", mask)]
    titles = _titles(header)
    assert len(segments) == len(titles), block
    for (start, end), (low, high) in zip(titles, segments, strict=True):
        assert low <= start, (header, start, low)
        assert end <= high, (header, end, high)


@pytest.fixture
def generated(sync_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_KEY_PREFIX", PREFIX)
    _generated(sync_redis)


@pytest.mark.usefixtures("generated")
@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("command", list(TABLE_COMMANDS))
def test_every_table_fits_and_its_headers_line_up_with_the_values(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    width: int,
    command: str,
) -> None:
    arguments, first_title = TABLE_COMMANDS[command]
    whole = _tables(_output(capsys, *arguments), first_title)
    monkeypatch.setenv("COLUMNS", str(width))

    lines = _output(capsys, *arguments)

    assert max(len(line) for line in lines) <= width
    tables = _tables(lines, first_title)
    assert tables, lines
    rows = len(whole[0]) - 1
    assert rows > 1
    for table in tables:
        # Folded or not, no row is lost, and every title is over its own column.
        assert len(table) - 1 == rows, table
        _assert_lined_up(table)
    for table in whole:
        _assert_lined_up(table)


def _legend(lines: list[str]) -> dict[str, str]:
    pairs = [pair for line in lines if line.startswith("(") for pair in line[1:-1].split()]
    return dict(pair.split("=", 1) for pair in pairs)


@pytest.mark.usefixtures("generated")
@pytest.mark.parametrize("width", [45, 60, 80, 120, None])
def test_stats_keeps_every_status_count_so_each_row_adds_up(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int | None
) -> None:
    if width is not None:
        monkeypatch.setenv("COLUMNS", str(width))

    lines = _output(capsys, "stats")

    meaning = _legend(lines)
    counts: dict[str, dict[str, int]] = {}
    for table in _tables(lines, "TOOL"):
        titles = [meaning.get(t, t) for t in re.split(r"\s{2,}", table[0].strip())]
        for row in table[1:]:
            cells = re.split(r"\s{2,}", row.strip())
            assert len(cells) == len(titles), (titles, row)
            counts.setdefault(cells[0], {}).update(
                (title, int(cell)) for title, cell in zip(titles, cells, strict=True)
                if title == "CALLS" or title.lower() in {s.value for s in ToolStatus}
            )  # fmt: skip
    assert len(counts) == len(TOOLS)
    for tool, by_title in counts.items():
        assert set(by_title) == {"CALLS", *(s.value.upper() for s in ToolStatus)}, tool
        assert sum(v for t, v in by_title.items() if t != "CALLS") == by_title["CALLS"], tool
        assert by_title["CALLS"] > 0
    if width is not None and width <= 80:
        # Short titles were needed, and the legend says what they mean.
        assert meaning["BIZ"] == "BUSINESS_ERROR"
        assert max(len(line) for line in lines) <= width
    # Only a very narrow terminal folds the counts onto a second table.
    assert len(_tables(lines, "TOOL")) == (2 if width == 45 else 1)
