"""Two real ``python -m bot webhook`` processes on one Redis, messages spread across both.

This is the scale-out docs/operations.md promises: any number of webhook processes
behind a load balancer, sharing Redis. The test plays the load balancer and
posts Telegram updates (JSON, with the secret header) straight to the two
processes; they answer through the fake Bot API and ask the scripted model
server, both in this test's process.

What "ordered" can mean here:

* Every update of a chat is handled in intake order, by whichever process's
  worker holds the chat (the chat's queue in Redis). This test still waits for
  a chat's replies before its next message goes to the *other* process, like a
  customer who writes, reads and writes again; the back-to-back case across
  processes is covered by ``tests/durability``. The chat's history must hold
  every pair, in the order the messages were written.
* Two messages of one chat posted to both processes at the same moment: both
  pairs are stored, each question next to its own answer, the later turn saw
  the earlier one; which came first is not specified.

A webhook retry that lands on the other process (the same update id posted to
both) is handled exactly once.
"""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from bot.sessions.models import ConversationSession
from bot.telegram.webhook import SECRET_HEADER
from bot.testing.audit_entries import stream_entries
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, text_answer, user_texts
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import FakeTelegramServer
from tests.durability.support import PREFIX, SECRET, STREAM, BotProcess, Cluster

SEQUENTIAL_CHATS = (801, 802, 803, 804)
MESSAGES_PER_CHAT = 6
CONCURRENT_CHAT = 810
RETRIED_CHAT = 820


def history_answer(body: dict[str, Any]) -> Reply:
    """Answers with every user message the model was shown, joined: the turn's view of history."""
    return text_answer(" | ".join(user_texts(body)))


@pytest.fixture
async def processes(
    tmp_path: Path,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
    redis_client: aioredis.Redis,
) -> AsyncIterator[tuple[BotProcess, BotProcess]]:
    """Both processes started at once and listening (the durability suite's launcher)."""
    openai_server.responder = history_answer
    cluster = Cluster(tmp_path, telegram, openai_server, redis_server.url)
    try:
        first, second = await asyncio.gather(
            cluster.start("webhook", "a"), cluster.start("webhook", "b")
        )
        yield first, second
    finally:
        await cluster.close()


Post = Callable[[BotProcess, dict[str, Any]], Awaitable[None]]


async def run_sequential_chat(
    chat_id: int,
    both: tuple[BotProcess, BotProcess],
    telegram: FakeTelegramServer,
    post: Post,
) -> list[str]:
    """Two messages back to back to one process, then the next two to the other, and so on.

    Before the chat switches process, its replies so far are awaited (see the module
    docstring). Returns the questions in the order they were written.
    """
    questions = [f"чат {chat_id} вопрос {n}" for n in range(MESSAGES_PER_CHAT)]
    for n, question in enumerate(questions):
        target = both[(chat_id + n // 2) % 2]
        await post(target, telegram.message_update(chat_id, question))
        switching = n % 2 == 1
        if switching:
            await telegram.wait_for_texts(chat_id, n + 1, within=15)
    return questions


async def stored_pairs(redis: aioredis.Redis, chat_id: int) -> list[tuple[str, str]]:
    """The (role, content) messages of the chat's session in Redis."""
    raw = await redis.hget(f"{PREFIX}:{{tg:{chat_id}}}:session", "d")
    assert raw, f"no session for chat {chat_id}"
    session = ConversationSession.model_validate_json(raw)
    return [(message.role, message.content) for message in session.messages]


async def test_two_webhook_processes_keep_histories_whole_ordered_and_updates_single(
    processes: tuple[BotProcess, BotProcess],
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_client: aioredis.Redis,
) -> None:
    """Every pair stored once and in order, one reply and one audited turn per update."""
    first, second = processes
    async with aiohttp.ClientSession() as http:

        async def post(target: BotProcess, update: dict[str, Any]) -> None:
            async with http.post(
                target.url, json=update, headers={SECRET_HEADER: SECRET}
            ) as response:
                assert response.status == 200, await response.text()

        # A webhook retry landing on the other process: the same update posted to both.
        retried = telegram.message_update(RETRIED_CHAT, "повтор вебхука")
        async with asyncio.timeout(40):
            written, _ = await asyncio.gather(
                asyncio.gather(
                    *(
                        run_sequential_chat(chat, processes, telegram, post)
                        for chat in SEQUENTIAL_CHATS
                    )
                ),
                asyncio.gather(
                    # Two messages of one chat at the same moment, one to each process.
                    post(first, telegram.message_update(CONCURRENT_CHAT, "одновременно в A")),
                    post(second, telegram.message_update(CONCURRENT_CHAT, "одновременно в B")),
                    post(first, retried),
                    post(second, retried),
                ),
            )
        await telegram.wait_for_texts(CONCURRENT_CHAT, 2, within=15)
        await telegram.wait_for_texts(RETRIED_CHAT, 1, within=15)
        # The chat whose update was retried is served normally afterwards.
        await post(second, telegram.message_update(RETRIED_CHAT, "после повтора"))
        await telegram.wait_for_texts(RETRIED_CHAT, 2, within=15)

    # SIGTERM drains what is in flight: after both exits, what is recorded is final.
    codes = await asyncio.gather(first.terminate(), second.terminate())
    logs = first.log() + second.log()
    assert list(codes) == [0, 0], logs
    assert "Traceback" not in logs

    for chat_id, questions in zip(SEQUENTIAL_CHATS, written, strict=True):
        # Each answer lists every question the turn saw: all earlier ones, whichever
        # process stored them.
        answers = [" | ".join(questions[: n + 1]) for n in range(len(questions))]
        expected: list[tuple[str, str]] = []
        for question, answer in zip(questions, answers, strict=True):
            expected += [("user", question), ("assistant", answer)]
        assert await stored_pairs(redis_client, chat_id) == expected
        assert telegram.sent_texts(chat_id) == answers

    concurrent = await stored_pairs(redis_client, CONCURRENT_CHAT)
    (_, earlier), (_, earlier_answer), (_, later), (_, later_answer) = concurrent
    assert {earlier, later} == {"одновременно в A", "одновременно в B"}
    assert [role for role, _ in concurrent] == ["user", "assistant", "user", "assistant"]
    assert earlier_answer == earlier
    assert later_answer == f"{earlier} | {later}"  # the lease made the later turn see the first
    assert sorted(telegram.sent_texts(CONCURRENT_CHAT)) == sorted([earlier_answer, later_answer])

    assert await stored_pairs(redis_client, RETRIED_CHAT) == [
        ("user", "повтор вебхука"),
        ("assistant", "повтор вебхука"),
        ("user", "после повтора"),
        ("assistant", "повтор вебхука | после повтора"),
    ]
    assert telegram.sent_texts(RETRIED_CHAT) == ["повтор вебхука", "повтор вебхука | после повтора"]
    assert logs.count("was already accepted; not queued again") == 1

    handled = {
        **{chat: MESSAGES_PER_CHAT for chat in SEQUENTIAL_CHATS},
        CONCURRENT_CHAT: 2,
        RETRIED_CHAT: 2,
    }
    turns = [
        entry for entry in await stream_entries(redis_client, STREAM) if entry["type"] == "turn"
    ]
    assert {entry["outcome"] for entry in turns} == {"answered"}
    per_chat = {chat: 0 for chat in handled}
    for entry in turns:
        per_chat[int(entry["chat_id"])] += 1
    assert per_chat == handled
    assert len({entry["turn_id"] for entry in turns}) == len(turns)
    # One model call per handled update: no turn ran twice, in either process.
    assert len(openai_server.requests) == sum(handled.values())
    accepted = [call for call in telegram.calls_of("sendMessage") if call.ok]
    assert len(accepted) == sum(handled.values())
