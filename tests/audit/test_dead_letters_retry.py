"""``support-audit dead-letters retry <id>`` and ``drop <id>``: a dead letter re-driven or gone.

The real intake and worker pool over a real Redis and the fake Bot API. A
message's earlier attempts are counted as lost (its worker died, as far as the
chat's attempts hash knows), so the worker gives it up the real way: the kind
failure text, a ``failed/poison_job`` audit entry and a dead letter. Then staff
run the CLI: a retry queues the message again under a new incident code and the
running worker answers it; a drop forgets the letter and the message kept with it.
"""

import asyncio
import json
from collections.abc import Sequence

import pytest
import redis
from aiogram import Bot

from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.queue.dead_letters import DeadLetter, redrive_turn_id
from bot.queue.jobs import turn_id_for
from bot.storage.keys import ConversationKeys, RedisKeys, telegram_conversation
from bot.storage.scripts.base import run_sync
from bot.storage.scripts.dead_letters import DropDeadLetter, Redrive
from bot.support_audit.cli import main
from bot.testing.audit_entries import stream_entries
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from tests.telegram.conftest import bot

__all__ = ["bot"]

PREFIX = "retrytest"
STREAM = "support:audit"
CHAT = 9300
QUESTION = "где мой заказ 8041?"

pytestmark = pytest.mark.usefixtures("cli_env")


@pytest.fixture(autouse=True)
def _prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_KEY_PREFIX", PREFIX)


def _echo(
    messages_: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    return text_result(f"Ответ: {messages_[-1]['content']}")


def _turns(entries: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    return [
        (e["turn_id"], e["outcome"], e.get("error_code", ""))
        for e in entries
        if e.get("type") == "turn"
    ]


async def test_a_retried_dead_letter_is_answered_under_a_new_incident_code(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    bot: Bot,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX=PREFIX,
        AUDIT_STREAM=STREAM,
        JOB_MAX_ATTEMPTS=1,
    )
    async with open_application(settings, llm=ScriptedClient(_echo)) as app:
        stack = TelegramStack(app, bot, telegram=telegram)
        update = telegram.message_update(CHAT, QUESTION)
        await stack.feed(update)
        # Its one allowed attempt died with its worker (as the attempts hash records it).
        chat = app.keys.conversation(telegram_conversation(CHAT))
        await app.redis.hset(chat.attempts, str(update["update_id"]), 1)
        old = turn_id_for(telegram_conversation(CHAT), update["update_id"])

        async with stack.running():
            [failure] = await telegram.wait_for_texts(CHAT, 1)
            assert old in failure

            async def audited(count: int) -> list[tuple[str, str, str]]:
                async with asyncio.timeout(10):
                    turns = _turns(await stream_entries(app.redis, STREAM))
                    while len(turns) < count:
                        await asyncio.sleep(0.02)
                        turns = _turns(await stream_entries(app.redis, STREAM))
                return turns

            assert await audited(1) == [(old, "failed", "poison_job")]
            raw = await app.redis.hget(app.keys.dead_letters, old)
            assert raw is not None
            letter = DeadLetter.model_validate_json(raw)
            # The job is kept for a retry; the listing never shows it.
            assert QUESTION in letter.job
            assert await asyncio.to_thread(main, ["dead-letters", "--json"]) == 0
            listed = capsys.readouterr().out
            assert old in listed
            assert QUESTION not in listed
            assert "job" not in json.loads(listed.splitlines()[0])

            assert await asyncio.to_thread(main, ["dead-letters", "retry", old]) == 0
            new = redrive_turn_id(old)
            assert capsys.readouterr().out.split()[:6] == [
                "dead",
                "letter",
                old,
                "queued",
                "again",
                "as",
            ]
            texts = await telegram.wait_for_texts(CHAT, 2)
            assert texts[1] == f"Ответ: {QUESTION}"
            assert await audited(2) == [(old, "failed", "poison_job"), (new, "answered", "")]
            # The letter and the message kept with it are gone; a second retry finds nothing.
            assert await app.redis.hget(app.keys.dead_letters, old) is None
            assert await app.redis.zscore(app.keys.dead_letter_order, old) is None
            assert await asyncio.to_thread(main, ["dead-letters", "retry", old]) == 1
            assert f"no dead letter {old}" in capsys.readouterr().err
            assert len(telegram.sent_texts(CHAT)) == 2


def test_drop_forgets_the_letter_and_its_message(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = RedisKeys(PREFIX)
    letter = DeadLetter(
        turn_id="K7M2QX9PAF",
        update_id=101,
        job_id="101",
        attempts=3,
        error="interrupted",
        given_up_ms=1_700_000_000_000,
        enqueued_ms=1_700_000_000_000,
        job='{"job_id":"101"}',
    )
    sync_redis.hset(keys.dead_letters, letter.turn_id, letter.model_dump_json())
    sync_redis.zadd(keys.dead_letter_order, {letter.turn_id: letter.given_up_ms})

    assert main(["dead-letters", "drop", "Код обращения: K7M2QX9PAF"]) == 0
    assert capsys.readouterr().out.strip() == "dead letter K7M2QX9PAF dropped"
    assert sync_redis.hlen(keys.dead_letters) == 0
    assert sync_redis.zcard(keys.dead_letter_order) == 0
    assert main(["dead-letters", "drop", "K7M2QX9PAF"]) == 1
    assert main(["dead-letters", "retry", "K7M2QX9PAF"]) == 1


def test_a_letter_kept_without_its_message_cannot_be_retried(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = RedisKeys(PREFIX)
    old_version = {
        "turn_id": "Q3W4E5R6T7",
        "update_id": 102,
        "job_id": "102",
        "attempts": 3,
        "error": "interrupted",
        "given_up_ms": 1,
        "enqueued_ms": 1,
    }
    sync_redis.hset(keys.dead_letters, "Q3W4E5R6T7", json.dumps(old_version))

    assert main(["dead-letters", "retry", "Q3W4E5R6T7"]) == 1
    assert "cannot be retried" in capsys.readouterr().err
    assert sync_redis.hexists(keys.dead_letters, "Q3W4E5R6T7")


def test_an_action_of_unknown_outcome_is_never_run_again_by_a_retry(
    sync_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = RedisKeys(PREFIX)
    letter = DeadLetter(
        turn_id="Q4N8ZR2WXT",
        update_id=117,
        job_id="117",
        attempts=1,
        error="action_outcome_unknown",
        given_up_ms=1_700_000_000_000,
        enqueued_ms=1_700_000_000_000,
        kind="action",
        action_id="k2m4p6q8r2s4t6v8",
        tool_name="cancel_order",
        server="shop",
        job='{"job_id":"117"}',
    )
    sync_redis.hset(keys.dead_letters, letter.turn_id, letter.model_dump_json())

    assert main(["dead-letters", "retry", "Q4N8ZR2WXT"]) == 1
    assert "outcome is unknown" in capsys.readouterr().err
    assert sync_redis.hexists(keys.dead_letters, "Q4N8ZR2WXT")
    assert sync_redis.llen(keys.conversation(telegram_conversation(CHAT)).queue) == 0


def test_the_retry_scripts_run_twice_leave_the_same_state(sync_redis: redis.Redis) -> None:
    keys = RedisKeys(PREFIX)
    chat: ConversationKeys = keys.conversation("tg:77")
    sync_redis.hset(chat.attempts, mapping={"5": 3, "5:by": "t", "5:error": "x", "6": 1})
    redrive = Redrive(
        chat=chat, turn_id="K7M2QX9PAF", job='{"job_id":"5"}', job_id="5", mark_ttl=60
    )

    assert run_sync(sync_redis, redrive) == 1
    state = (sync_redis.lrange(chat.queue, 0, -1), sync_redis.hgetall(chat.attempts))
    assert run_sync(sync_redis, redrive) == 0
    assert (sync_redis.lrange(chat.queue, 0, -1), sync_redis.hgetall(chat.attempts)) == state
    assert state == (['{"job_id":"5"}'], {"6": "1"})

    sync_redis.hset(keys.dead_letters, "K7M2QX9PAF", "{}")
    sync_redis.zadd(keys.dead_letter_order, {"K7M2QX9PAF": 1})
    drop = DropDeadLetter(
        letters=keys.dead_letters, order=keys.dead_letter_order, turn_id="K7M2QX9PAF"
    )
    assert run_sync(sync_redis, drop) == 1
    assert run_sync(sync_redis, drop) == 0
    assert sync_redis.exists(keys.dead_letters, keys.dead_letter_order) == 0
