"""``support-audit actions`` and the actions part of ``stats``, against a real redis-server."""

import json

import pytest
import redis

from bot.audit.actions import ActionAuditEntry
from bot.support_audit.cli import main
from bot.testing.audit_entries import append, simple_turn
from tests.audit.conftest import STREAM

pytestmark = pytest.mark.usefixtures("cli_env")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    status = main(list(argv))
    return status, capsys.readouterr().out.splitlines()


def _steps(client: redis.Redis) -> None:
    def step(event: str, action: str, **extra: object) -> dict[str, str]:
        return ActionAuditEntry(
            chat_id="4242",
            turn_id="TURN000001",
            event=event,
            action_id=action,
            tool_name="cancel_order",
            **extra,  # type: ignore[arg-type]
        ).to_fields()

    for fields in (
        step("proposed", "aaaa"),
        step("confirmed", "aaaa", decide_ms=4000.0),
        step("executed", "aaaa", duration_ms=3.5),
        step("proposed", "bbbb"),
        step("declined", "bbbb", decide_ms=10000.0),
        step("proposed", "cccc"),
        step("expired", "cccc", error_code="expired"),
    ):
        client.xadd(STREAM, fields)  # type: ignore[arg-type]


def test_actions_lists_every_step_without_arguments(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    append(sync_redis, STREAM, simple_turn("TURN000001"))
    _steps(sync_redis)

    status, out = _run(capsys, "actions", "--utc")
    assert status == 0
    assert out[0].split() == [
        "TIME", "CHAT", "TURN", "ACTION", "TOOL", "EVENT", "CODE", "DECIDED", "RAN",
    ]  # fmt: skip
    events = [line.split()[6] for line in out[1:]]
    assert events == [
        "proposed", "confirmed", "executed", "proposed", "declined", "proposed", "expired",
    ]  # fmt: skip
    # Durations read as everywhere in the CLI (bot.support_audit.table.format_duration_ms).
    assert out[2].endswith("4.0 s       -")
    assert out[3].endswith("3.5 ms")

    status, lines = _run(capsys, "actions", "--json")
    rows = [json.loads(line) for line in lines]
    assert status == 0
    assert [row["event"] for row in rows][:3] == ["proposed", "confirmed", "executed"]
    assert set(rows[0]) == {
        "at", "chat_id", "turn_id", "action_id", "tool_name", "event", "error_code",
        "decide_ms", "duration_ms",
    }  # fmt: skip


def test_stats_counts_actions_per_tool_with_the_time_to_decide(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    append(sync_redis, STREAM, simple_turn("TURN000001"))
    _steps(sync_redis)

    status, out = _run(capsys, "stats")
    assert status == 0
    assert out[-1] == (
        "actions cancel_order: 3 proposed, 1 confirmed, 1 declined, 1 expired, 0 failed; "
        "time to decide p50 4.0s  p95 10.0s"
    )
    status, lines = _run(capsys, "stats", "--json")
    report = json.loads(lines[0])
    assert report["actions"]["cancel_order"]["proposed"] == 3
    assert report["actions"]["cancel_order"]["decide_ms"] == {"p50": 4000.0, "p95": 10000.0}

    status, lines = _run(capsys, "tail", "--type", "action", "--json", "-n", "10")
    assert status == 0
    assert len(lines) == 7
