"""``support-audit knowledge-gaps`` and the empty-search share of ``stats``, over a real Redis."""

import dataclasses
import json

import pytest
import redis

from bot.audit.schema import AuditEntry
from bot.support_audit.cli import main
from bot.testing.audit_entries import append, hours_ago, tool_entry, turn_entry
from tests.audit.conftest import STREAM

pytestmark = pytest.mark.usefixtures("cli_env")


def _search_turn(turn_id: str, chat_id: str, *counts: int) -> list[AuditEntry]:
    """A turn with one help-center search per count (how many articles each found)."""
    entries: list[AuditEntry] = [
        dataclasses.replace(
            tool_entry(turn_id, chat_id=chat_id, tool_name="search_help_center", call_id=f"c{i}"),
            result_count=count,
            top_result_id="refunds" if count else None,
        )
        for i, count in enumerate(counts)
    ]
    entries.append(turn_entry(turn_id, chat_id=chat_id, tool_names=("search_help_center",)))
    return entries


def test_knowledge_gaps_lists_the_turns_whose_searches_found_nothing(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    append(sync_redis, STREAM, _search_turn("OLDGAP2345", "999", 0), at=hours_ago(24 * 10))
    append(sync_redis, STREAM, _search_turn("FOUND23456", "111", 3))
    append(sync_redis, STREAM, _search_turn("EMPTY23456", "222", 0))
    append(sync_redis, STREAM, _search_turn("RETRY23456", "333", 0, 2))
    append(sync_redis, STREAM, _search_turn("TWICE23456", "444", 0, 0))

    assert main(["knowledge-gaps", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["turn_id"], r["chat_id"], r["searches"]) for r in rows] == [
        ("EMPTY23456", "222", 1),
        ("TWICE23456", "444", 2),
    ]
    assert main(["knowledge-gaps", "--since", "30d"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["TIME", "CHAT", "TURN", "SEARCHES"]
    assert [line.split()[2:] for line in table[1:]] == [
        ["999", "OLDGAP2345", "1"],
        ["222", "EMPTY23456", "1"],
        ["444", "TWICE23456", "2"],
    ]


def test_knowledge_gaps_says_so_when_every_search_found_an_article(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    append(sync_redis, STREAM, _search_turn("FOUND23456", "111", 1))
    assert main(["knowledge-gaps"]) == 0
    assert capsys.readouterr().out == "no searches without an article\n"


def test_stats_show_the_share_of_empty_searches(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    append(sync_redis, STREAM, _search_turn("FOUND23456", "111", 3))
    append(sync_redis, STREAM, _search_turn("EMPTY23456", "222", 0))
    append(sync_redis, STREAM, _search_turn("RETRY23456", "333", 0, 2))

    assert main(["stats", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["knowledge"] == {"searches": 4, "empty": 2, "empty_rate": 0.5}
    assert main(["stats"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "help center: 4 searches, 2 found nothing (50.0%); see support-audit knowledge-gaps" in (
        lines
    )
