"""``support-audit handoffs`` and the handoff lines of ``stats``, over a real redis-server."""

import json

import pytest
import redis

from bot.audit.schema import HandoffAuditEntry
from bot.support_audit.cli import main
from bot.testing.audit_entries import append, simple_turn
from tests.audit.conftest import STREAM

pytestmark = pytest.mark.usefixtures("cli_env")


def _handoff(client: redis.Redis, chat: str, event: str, **fields: object) -> None:
    entry = HandoffAuditEntry(chat_id=chat, turn_id=f"T{chat}{event}"[:10], event=event, **fields)  # type: ignore[arg-type]
    client.xadd(STREAM, entry.to_fields())  # type: ignore[arg-type]


def test_handoffs_lists_open_conversations_with_state_and_wait(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _handoff(sync_redis, "111", "opened", trigger="command")
    _handoff(sync_redis, "222", "opened", trigger="tool", reason="complaint")
    _handoff(sync_redis, "222", "first_reply", wait_ms=42000.0)
    _handoff(sync_redis, "333", "opened", trigger="staff")
    _handoff(sync_redis, "333", "closed", closed_by="staff", duration_ms=1000.0)

    assert main(["handoffs", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    assert [(r["chat_id"], r["state"], r["trigger"], r["reason"]) for r in rows] == [
        ("111", "waiting", "command", ""),
        ("222", "human", "tool", "complaint"),
    ]
    assert rows[0]["waiting_seconds"] >= 0
    assert rows[1]["waiting_seconds"] == 42.0
    assert main(["handoffs"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["CHAT", "STATE", "OPENED", "WAITED", "TRIGGER"]
    assert table[2].split()[-3:] == ["42.0", "s", "tool/complaint"]
    assert main(["tail", "--type", "handoff", "--json"]) == 0
    events = [json.loads(line)["event"] for line in capsys.readouterr().out.splitlines()]
    assert events == ["opened", "opened", "first_reply", "opened", "closed"]
    assert main(["tail", "--type", "handoff"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 5


def test_stats_show_the_handoff_rate_and_time_to_first_staff_reply(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    for chat in ("1", "2", "3", "4"):
        append(sync_redis, STREAM, simple_turn(f"TURN{chat:0>6}", chat_id=chat))
    _handoff(sync_redis, "1", "opened", trigger="command")
    _handoff(sync_redis, "1", "first_reply", wait_ms=30000.0)

    assert main(["stats", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert main(["stats"]) == 0
    lines = capsys.readouterr().out.splitlines()

    assert report["handoffs"]["opened"] == 1
    assert report["handoffs"]["chats"] == 4
    assert report["handoffs"]["rate"] == 0.25
    assert report["handoffs"]["first_reply_ms"]["p50"] == 30000.0
    assert lines[-1].startswith("handoffs: 1 opened in 4 chats (25.0%); first staff reply: p50 30s")
