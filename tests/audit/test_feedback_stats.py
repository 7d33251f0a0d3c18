"""``stats`` gives customer satisfaction from the rollups: CSAT, scores, answer rate."""

import json

import pytest
import redis

from bot.audit.feedback import FeedbackAuditEntry
from bot.support_audit.cli import main
from bot.testing.audit_entries import append_indexed
from tests.audit.conftest import STREAM

pytestmark = pytest.mark.usefixtures("cli_env")


def _feedback(turn: str, event: str, by: str, score: int | None = None) -> dict[str, str]:
    entry = FeedbackAuditEntry(
        chat_id="4242", turn_id=turn, event=event, answered_by=by, turns=2, score=score
    )
    return entry.to_fields()


def _write(client: redis.Redis) -> None:
    # Bot only: 4 asked, answered 5, 4, 2. Handed off: 2 asked, answered 1.
    asked = [("BOTASK0001", "bot"), ("BOTASK0002", "bot"), ("BOTASK0003", "bot")]
    asked += [("BOTASK0004", "bot"), ("HANASK0001", "bot_then_person")]
    asked += [("HANASK0002", "bot_then_person")]
    for turn, by in asked:
        assert append_indexed(client, STREAM, [_feedback(turn, "asked", by)])
    answers = [("BOTANS0001", "bot", 5), ("BOTANS0002", "bot", 4), ("BOTANS0003", "bot", 2)]
    answers.append(("HANANS0001", "bot_then_person", 1))
    for turn, by, score in answers:
        assert append_indexed(client, STREAM, [_feedback(turn, "answered", by, score)])


def test_stats_show_csat_scores_and_the_answer_rate_from_the_rollups(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(sync_redis)
    sync_redis.config_resetstat()

    assert main(["stats", "--json"]) == 0

    feedback = json.loads(capsys.readouterr().out)["feedback"]
    assert (feedback["asked"], feedback["answered"]) == (6, 4)
    assert feedback["answer_rate"] == pytest.approx(4 / 6)
    assert feedback["csat"] == pytest.approx(2 / 4)
    assert feedback["bot"]["csat"] == pytest.approx(2 / 3)
    assert feedback["bot"]["scores"] == {"1": 0, "2": 1, "3": 0, "4": 1, "5": 1}
    assert feedback["bot_then_person"]["csat"] == 0.0
    assert feedback["bot_then_person"]["scores"] == {"1": 1, "2": 0, "3": 0, "4": 0, "5": 0}
    assert feedback["bot_then_person"]["asked"] == 2
    # From the rollups: the stream is read for its first entry at most, never scanned.
    commands = sync_redis.info("commandstats")
    assert commands.get("cmdstat_xrange", {}).get("calls", 0) <= 1
    assert "cmdstat_xrevrange" not in commands

    assert main(["stats"]) == 0
    text = capsys.readouterr().out
    assert "feedback: 6 asked, 4 answered (66.7%); CSAT 50%" in text
    assert "feedback bot only: CSAT 67% of 3 (4 asked); scores 1:0 2:1 3:0 4:1 5:1" in text
    assert "feedback handed off: CSAT 0% of 1 (2 asked); scores 1:1 2:0 3:0 4:0 5:0" in text


def test_stats_name_only_the_kinds_of_conversation_that_had_feedback(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    assert append_indexed(sync_redis, STREAM, [_feedback("BOTASK0001", "asked", "bot")])

    assert main(["stats"]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert "feedback: 1 asked, 0 answered (0.0%); CSAT -" in lines
    assert "feedback bot only: CSAT - of 0 (1 asked); scores 1:0 2:0 3:0 4:0 5:0" in lines
    assert not any(line.startswith("feedback handed off") for line in lines)
