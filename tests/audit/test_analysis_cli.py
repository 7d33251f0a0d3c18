"""The analysis in the staff CLI: ``stats`` per category (containment, handed off) from the
stream and from the write-time index alike, and ``analysis`` listing them; never text."""

import json

import pytest
import redis

from bot.audit.analysis import ANALYSED, ANALYSIS_FAILED, AnalysisAuditEntry
from bot.audit.feedback import FeedbackAuditEntry
from bot.support_audit.cli import main
from bot.support_audit.lookup import AuditIndex
from bot.testing.audit_entries import append_indexed
from tests.audit.conftest import STREAM

pytestmark = pytest.mark.usefixtures("cli_env")


def analysed(chat: str, category: str, *, resolved: bool, person: bool) -> dict[str, str]:
    return AnalysisAuditEntry(
        chat_id=chat,
        turn_id=f"ANALYSIS{chat}",
        event=ANALYSED,
        category=category,
        sentiment="negative" if person else "neutral",
        urgency="normal",
        language="ru",
        resolved=int(resolved),
        turns=3,
        person=int(person),
        total_tokens=420,
    ).to_fields()


def fill(client: redis.Redis) -> None:
    rows = [
        analysed("101", "return", resolved=True, person=False),
        analysed("102", "return", resolved=True, person=False),
        analysed("103", "return", resolved=False, person=True),
        analysed("104", "order_status", resolved=True, person=False),
        AnalysisAuditEntry(
            chat_id="105", turn_id="ANALYSIS105", event=ANALYSIS_FAILED, turns=2, error="invalid"
        ).to_fields(),
    ]
    # Satisfaction answers of analysed conversations carry their category.
    rows += [
        FeedbackAuditEntry(
            chat_id=chat,
            turn_id=f"FEEDBACK{chat}",
            event="answered",
            answered_by="bot",
            turns=3,
            score=score,
            category=category,
        ).to_fields()
        for chat, category, score in (("101", "return", 5), ("102", "return", 2))
    ]
    for row in rows:
        assert append_indexed(client, STREAM, [row])


def run(capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    assert main(list(arguments)) == 0
    return capsys.readouterr().out


def test_stats_per_category_from_the_index_and_from_the_stream_agree(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    fill(sync_redis)

    indexed = json.loads(run(capsys, "stats", "--json"))["analysis"]
    # Without the index the stream itself is read: the same numbers.
    sync_redis.delete(*sync_redis.keys(f"{STREAM}:ix*"), *sync_redis.keys("*{" + STREAM + "}*"))
    assert AuditIndex(sync_redis, STREAM).covers() is False, "the second read is the stream's"
    scanned = json.loads(run(capsys, "stats", "--json"))["analysis"]

    assert indexed == scanned
    assert indexed["conversations"] == 4
    assert indexed["categories"]["return"] == {
        "conversations": 3,
        "contained": 2,
        "handed_off": 1,
        "containment": pytest.approx(2 / 3),
        "csat": 0.5,
    }
    assert indexed["categories"]["order_status"]["containment"] == 1.0
    assert indexed["categories"]["order_status"]["csat"] is None
    assert indexed["sentiment"] == {"negative": 1, "neutral": 3}
    assert indexed["failed"] == {"invalid": 1}

    monkeypatch.setenv("COLUMNS", "80")
    text = run(capsys, "stats")
    table = text[text.index("analysis: 4 conversations") :].splitlines()
    assert all(len(line) <= 80 for line in table)
    header, *rows = table[1:3]
    assert header.split() == [
        "CATEGORY",
        "CONVERSATIONS",
        "BOT",
        "ALONE",
        "CONTAINMENT",
        "HANDED",
        "OFF",
        "CSAT",
    ]
    assert rows[0].split() == ["return", "3", "2", "67%", "1", "50%"]
    assert "analysis failed: invalid 1" in text


def test_analysis_lists_entries_and_filters_by_category(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
):
    fill(sync_redis)

    lines = [json.loads(line) for line in run(capsys, "analysis", "--json").splitlines()]
    assert [line["chat_id"] for line in lines] == ["101", "102", "103", "104", "105"]
    only = run(capsys, "analysis", "--category", "order_status", "--utc").splitlines()
    assert len(only) == 2
    assert only[1].split()[-7:] == ["order_status", "neutral", "normal", "ru", "yes", "no", "3"]
    assert run(capsys, "analysis", "--category", "payment") == "no analyses in category payment\n"
