"""Redis killed (SIGKILL) and restarted in the middle of a burst of turns.

The suite's redis-server keeps nothing on disk by itself; the test takes one
snapshot (``SAVE``) after the warm-up, so the restarted server comes back with
the sessions as they were then, like a real restart from an RDB file or a
fail-over to a slightly stale replica. Turns committed after the snapshot are
lost with the crash by design; what must hold is that nothing is corrupted,
nothing half-written, nothing that was snapshotted is lost, and the bot serves
again promptly.
"""

import asyncio
import itertools

import redis.asyncio as aioredis

from bot.chat_errors import ChatStorageError
from bot.engine.chat_service import ChatReply
from bot.testing.chat_harness import ChatHarness
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, text_answer
from bot.testing.redis_server import RedisServer
from tests.reliability.conftest import engine_over_http, stored_sessions

CONVERSATIONS = 20
TURNS_PER_CONVERSATION = 5
RECOVERY_TURNS = 3


def echo(body: dict[str, object]) -> Reply:
    """Answers ``Ответ: <last user text>`` (summaries never happen at this budget)."""
    messages = body["messages"]
    assert isinstance(messages, list)
    return text_answer(f"Ответ: {messages[-1]['content']}")


async def _ask_in_order(engine: ChatHarness, key: str, texts: list[str]) -> list[object]:
    outcomes: list[object] = []
    for text in texts:
        try:
            outcomes.append(await engine.ask(key, text))
        except ChatStorageError as error:
            outcomes.append(error)
    return outcomes


async def test_a_redis_crash_mid_burst_loses_no_snapshotted_session_and_corrupts_nothing(
    own_redis_server: RedisServer,
):
    # As bot.app.connect_redis builds it: redis-py's default retry policy, short socket timeouts.
    redis = aioredis.Redis.from_url(
        own_redis_server.url, socket_timeout=1.0, socket_connect_timeout=0.5
    )
    async with ScriptedOpenAIServer() as server:
        server.responder = echo
        server.latency_seconds = 0.02
        engine = engine_over_http(redis, server.base_url)
        keys = [f"k{n}" for n in range(CONVERSATIONS)]
        try:
            for key in keys:
                await engine.ask(key, f"{key} разминка")
            await redis.save()  # the state a restarted server comes back with

            counter = itertools.count()
            burst = [
                asyncio.create_task(
                    _ask_in_order(
                        engine,
                        key,
                        [f"{key} ход {next(counter):03d}" for _ in range(TURNS_PER_CONVERSATION)],
                    )
                )
                for key in keys
            ]
            await asyncio.sleep(0.1)
            own_redis_server.stop()
            await asyncio.sleep(0.3)
            own_redis_server.start()  # returns once the server answers

            # Serving again as soon as Redis is: within a few turns (the first may meet a
            # connection the crash broke), counted in turns rather than seconds, which a
            # loaded machine stretches.
            for attempt in range(1, RECOVERY_TURNS + 1):
                try:
                    await engine.ask("probe", "снова работаете?")
                    break
                except ChatStorageError:
                    assert attempt < RECOVERY_TURNS, f"not serving after {attempt} turns"
                    await asyncio.sleep(0.05)

            outcomes = [o for batch in await asyncio.gather(*burst) for o in batch]
            answered = [o for o in outcomes if isinstance(o, ChatReply)]
            failed = [o for o in outcomes if isinstance(o, ChatStorageError)]
            # Every turn was answered or ended in the storage incident message, nothing else.
            assert len(answered) + len(failed) == CONVERSATIONS * TURNS_PER_CONVERSATION
            assert failed, "the crash hit no turn: the burst was over before the kill"
            assert all(error.turn_id and str(error) for error in failed)

            for key in keys:
                await engine.ask(key, f"{key} после")
            sessions = await stored_sessions(redis)
        finally:
            await engine.close()
            await redis.aclose()

    assert set(keys) <= set(sessions)
    for key in keys:
        pairs = list(zip(sessions[key].messages[::2], sessions[key].messages[1::2], strict=True))
        questions = [q.content for q, _ in pairs]
        # Nothing snapshotted was lost; nothing half-written; each conversation stays ordered.
        assert questions[0] == f"{key} разминка"
        assert questions[-1] == f"{key} после"
        assert questions[1:-1] == sorted(questions[1:-1])
        assert all(q.role == "user" and a.role == "assistant" for q, a in pairs)
        assert all(a.content == f"Ответ: {q.content}" for q, a in pairs)
