"""The SessionStore contract, run against every implementation (Redis, in memory)."""

import asyncio
from datetime import UTC, datetime

import pytest

from bot.sessions.models import ConversationSession
from bot.sessions.redis_store import RedisSessionStore
from bot.sessions.store import SessionConflictError, SessionLockTimeoutError, SessionStore
from bot.storage.keys import RedisKeys
from bot.testing.memory_session_store import InMemorySessionStore

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["redis", "memory"])
def store(request: pytest.FixtureRequest) -> SessionStore:
    """Each implementation, empty."""
    if request.param == "redis":
        client = request.getfixturevalue("redis_client")
        return RedisSessionStore(
            client, keys=RedisKeys("c"), ttl_seconds=3600, archive_ttl_seconds=7200
        )
    return InMemorySessionStore()


def session_for(key: str, turns: int = 1) -> ConversationSession:
    session = ConversationSession.start(key, NOW, "support_chat", "1.2.0")
    for i in range(turns):
        session = session.with_turn(f"вопрос {i}", f"ответ {i}", NOW, "1.2.0")
    return session


async def test_a_new_conversation_has_no_session_and_an_empty_version(store: SessionStore):
    locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    assert (locked.conversation_key, locked.session, locked.version) == ("100", None, "")
    await store.release(locked)
    assert await store.load("100") is None


async def test_a_committed_session_is_loaded_with_the_next_version(store: SessionStore):
    session = session_for("100", turns=2)
    await store.commit(await store.acquire("100", lease_seconds=5, wait_seconds=1), session)

    assert await store.load("100") == session
    relocked = await store.acquire("100", lease_seconds=5, wait_seconds=0.1)  # commit released
    assert (relocked.session, relocked.version) == (session, "1")
    await store.commit(relocked, session_for("100", turns=3))
    again = await store.acquire("100", lease_seconds=5, wait_seconds=0.1)
    assert again.version == "2"
    await store.release(again)


async def test_two_conversations_are_isolated(store: SessionStore):
    sessions = {"1": session_for("1", 1), "2": session_for("2", 3)}
    for key, session in sessions.items():
        await store.commit(await store.acquire(key, lease_seconds=5, wait_seconds=1), session)
    assert {key: await store.load(key) for key in sessions} == sessions


async def test_a_second_turn_waits_a_bounded_time_for_the_lease(store: SessionStore):
    held = await store.acquire("100", lease_seconds=30, wait_seconds=1)
    other = await store.acquire("200", lease_seconds=30, wait_seconds=0.1)  # not this one's lease
    with pytest.raises(SessionLockTimeoutError):
        await store.acquire("100", lease_seconds=30, wait_seconds=0.2)
    await store.release(held)
    again = await store.acquire("100", lease_seconds=30, wait_seconds=0.2)
    await store.release(again)
    await store.release(other)


async def test_a_waiting_turn_gets_the_lease_once_it_is_released(store: SessionStore):
    held = await store.acquire("100", lease_seconds=30, wait_seconds=1)
    waiting = asyncio.create_task(store.acquire("100", lease_seconds=30, wait_seconds=5))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    session = session_for("100")
    await store.commit(held, session)
    locked = await asyncio.wait_for(waiting, timeout=5)
    assert locked.session == session
    await store.release(locked)


async def test_a_lease_of_a_dead_process_expires(store: SessionStore):
    await store.acquire("100", lease_seconds=0.2, wait_seconds=1)  # never released
    locked = await store.acquire("100", lease_seconds=5, wait_seconds=3)
    assert locked.session is None
    await store.release(locked)


async def test_releasing_a_lost_lease_leaves_the_new_holder_alone(store: SessionStore):
    slow = await store.acquire("100", lease_seconds=0.1, wait_seconds=1)
    await asyncio.sleep(0.2)
    fast = await store.acquire("100", lease_seconds=30, wait_seconds=1)
    await store.release(slow)
    with pytest.raises(SessionLockTimeoutError):
        await store.acquire("100", lease_seconds=30, wait_seconds=0.1)
    await store.release(fast)


async def test_a_lost_lease_never_overwrites_a_newer_session(store: SessionStore):
    slow = await store.acquire("100", lease_seconds=0.1, wait_seconds=1)
    await asyncio.sleep(0.2)  # the slow turn's lease runs out
    fast = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    newer = session_for("100", turns=1)
    await store.commit(fast, newer)

    with pytest.raises(SessionConflictError):
        await store.commit(slow, session_for("100", turns=5))
    assert await store.load("100") == newer


async def test_archive_starts_the_conversation_fresh_and_releases_the_lease(
    store: SessionStore,
):
    await store.commit(
        await store.acquire("100", lease_seconds=5, wait_seconds=1), session_for("100", 2)
    )
    await store.archive(await store.acquire("100", lease_seconds=5, wait_seconds=1))

    assert await store.load("100") is None
    again = await store.acquire("100", lease_seconds=5, wait_seconds=0.1)
    assert (again.session, again.version) == (None, "")
    await store.release(again)
