"""``support-audit dead-letters``: jobs given up, newest first, ids and the error kind only."""

import json
from datetime import UTC, datetime

import pytest
import redis

from bot.audit.schema import FAILED, TurnAuditEntry, TurnErrorCode, read_entry
from bot.queue.dead_letters import DeadLetter
from bot.storage.keys import RedisKeys
from bot.support_audit.cli import main
from turn import Usage

pytestmark = pytest.mark.usefixtures("cli_env")

PREFIX = "clitest"
GIVEN_UP = datetime(2026, 12, 1, 9, 30, 5, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_KEY_PREFIX", PREFIX)


def _store(client: redis.Redis, *letters: DeadLetter) -> None:
    keys = RedisKeys(PREFIX)
    for letter in letters:
        client.hset(keys.dead_letters, letter.turn_id, letter.model_dump_json())
        client.zadd(keys.dead_letter_order, {letter.turn_id: letter.given_up_ms})


def _letter(turn_id: str, update_id: int, seconds_later: int, error: str) -> DeadLetter:
    at_ms = int(GIVEN_UP.timestamp() * 1000) + seconds_later * 1000
    return DeadLetter(
        turn_id=turn_id,
        update_id=update_id,
        job_id=str(update_id),
        attempts=3,
        error=error,
        given_up_ms=at_ms,
        enqueued_ms=at_ms - 60_000,
    )


def test_dead_letters_are_listed_newest_first_as_json_lines(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _store(
        sync_redis,
        _letter("K7M2QX9PAF", 101, 0, "interrupted"),
        _letter("Q3W4E5R6T7", 102, 5, "RuntimeError"),
    )

    assert main(["dead-letters", "--json"]) == 0

    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows == [
        {
            "given_up_at": "2026-12-01T09:30:10+00:00",
            "update_id": 102,
            "turn_id": "Q3W4E5R6T7",
            "attempts": 3,
            "error": "RuntimeError",
            "queued_at": "2026-12-01T09:29:10+00:00",
        },
        {
            "given_up_at": "2026-12-01T09:30:05+00:00",
            "update_id": 101,
            "turn_id": "K7M2QX9PAF",
            "attempts": 3,
            "error": "interrupted",
            "queued_at": "2026-12-01T09:29:05+00:00",
        },
    ]


def test_dead_letters_as_a_table(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _store(sync_redis, _letter("K7M2QX9PAF", 101, 0, "interrupted"))

    assert main(["dead-letters", "--utc", "-n", "5"]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["GIVEN", "UP", "UPDATE", "INCIDENT", "ATTEMPTS", "ERROR"]
    assert lines[1].split() == ["2026-12-01", "09:30:05", "101", "K7M2QX9PAF", "3", "interrupted"]


def test_no_dead_letters_says_so(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dead-letters"]) == 0
    assert capsys.readouterr().out.splitlines() == ["no dead letters"]


def test_a_given_up_turn_is_audited_as_failed_with_its_error_code() -> None:
    entry = TurnAuditEntry(
        chat_id="42",
        turn_id="K7M2QX9PAF",
        outcome=FAILED,
        error_code=TurnErrorCode.POISON_JOB,
        model="",
        model_steps=None,
        tool_calls=None,
        tool_names=(),
        usage=Usage(),
        latency_ms=None,
        prompt_id="",
        prompt_version="",
    )

    fields = entry.to_fields()

    assert (fields["outcome"], fields["error_code"]) == ("failed", "poison_job")
    assert read_entry(fields) == entry
