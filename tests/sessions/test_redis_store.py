"""RedisSessionStore against a real redis-server: what only Redis does.

The store's contract (leases, versions, archive) is in tests/contracts/test_session_store.py.
"""

import json
import logging
from datetime import UTC, datetime

import pytest
import redis.asyncio as aioredis

from bot.sessions.models import ConversationSession
from bot.sessions.redis_store import RedisSessionStore
from bot.sessions.store import (
    JobCompletion,
    SessionConflictError,
    SessionLeaseLostError,
    SessionStoreUnavailableError,
)
from bot.storage.keys import RedisKeys
from bot.testing.redis_server import RedisServer
from bot.testing.storage import all_keys

TTL = 3600
ARCHIVE_TTL = 7200
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def make_store(client: aioredis.Redis) -> RedisSessionStore:
    return RedisSessionStore(
        client, keys=RedisKeys("t"), ttl_seconds=TTL, archive_ttl_seconds=ARCHIVE_TTL
    )


def session_for(key: str, turns: int = 1) -> ConversationSession:
    session = ConversationSession.start(key, NOW, "support_chat", "1.2.0")
    for i in range(turns):
        session = session.with_turn(f"вопрос {i}", f"ответ {i}", NOW, "1.2.0")
    return session


@pytest.mark.standalone_only  # the second client is a plain one to the standalone server
async def test_a_committed_session_survives_new_store_and_client_objects(
    redis_client, redis_server
):
    store = make_store(redis_client)
    locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    session = session_for("100", turns=2)
    await store.commit(locked, session)

    other_client = aioredis.Redis.from_url(redis_server.url)
    try:
        fresh = make_store(other_client)
        relocked = await fresh.acquire("100", lease_seconds=5, wait_seconds=1)
        assert relocked.session == session
        assert relocked.version == "1"
        await fresh.release(relocked)
    finally:
        await other_client.aclose()


async def test_commit_sets_the_ttl_and_every_commit_refreshes_it(redis_client):
    store = make_store(redis_client)
    key = store.keys("100").session
    locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    await store.commit(locked, session_for("100"))
    assert 0 < await redis_client.ttl(key) <= TTL

    await redis_client.expire(key, 10)
    locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    await store.commit(locked, session_for("100", turns=2))
    assert await redis_client.ttl(key) > TTL - 5


async def test_every_key_of_a_conversation_shares_one_cluster_hash_tag(redis_client):
    store = make_store(redis_client)
    locked = await store.acquire("-100123", lease_seconds=5, wait_seconds=1)
    await store.commit(locked, session_for("-100123"))
    locked = await store.acquire("-100123", lease_seconds=5, wait_seconds=1)
    await store.archive(locked)
    keys = [key.decode() for key in await all_keys(redis_client, "t:*")]
    assert keys
    assert all(key.startswith("t:{-100123}:") for key in keys), keys


async def test_a_corrupt_entry_is_quarantined_and_the_conversation_starts_fresh(
    redis_client, caplog
):
    store = make_store(redis_client)
    await redis_client.hset(store.keys("100").session, mapping={"v": "3", "d": "{not json"})
    with caplog.at_level(logging.WARNING):
        locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    assert locked.session is None
    assert "unreadable" in caplog.text

    quarantined = await all_keys(redis_client, "t:{100}:quarantine:*")
    assert len(quarantined) == 1
    assert await redis_client.hget(quarantined[0], "d") == b"{not json"
    assert 0 < await redis_client.ttl(quarantined[0]) <= ARCHIVE_TTL

    fresh = session_for("100")
    await store.commit(locked, fresh)
    assert await store.load("100") == fresh


async def test_an_entry_of_an_older_schema_is_quarantined_not_misread(redis_client):
    store = make_store(redis_client)
    old = session_for("100").model_dump(mode="json")
    old["schema_version"] = 0
    await redis_client.hset(
        store.keys("100").session,
        mapping={"v": "1", "d": json.dumps(old)},
    )
    locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    assert locked.session is None
    assert len(await all_keys(redis_client, "t:{100}:quarantine:*")) == 1
    await store.release(locked)


async def test_archive_moves_the_session_aside_with_its_own_ttl(redis_client):
    store = make_store(redis_client)
    locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    session = session_for("100", turns=2)
    await store.commit(locked, session)

    locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    await store.archive(locked)
    assert await store.load("100") is None
    archive_key = store.keys("100").archive(session.session_id)
    assert (
        ConversationSession.model_validate_json(await redis_client.hget(archive_key, "d"))
        == session
    )
    assert TTL < await redis_client.ttl(archive_key) <= ARCHIVE_TTL
    # The lease was released with the archive.
    again = await store.acquire("100", lease_seconds=5, wait_seconds=0.1)
    assert again.session is None
    await store.release(again)


# Commands our scripts run inside Redis; commandstats counts them too.
SCRIPT_INTERNAL = {
    "cmdstat_set",
    "cmdstat_hmget",
    "cmdstat_get",
    "cmdstat_hget",
    "cmdstat_hset",
    "cmdstat_hdel",
    "cmdstat_expire",
    "cmdstat_del",
}


@pytest.mark.standalone_only
async def test_one_turn_costs_two_redis_round_trips(redis_client):
    store = make_store(redis_client)
    warm = await store.acquire("100", lease_seconds=5, wait_seconds=1)  # scripts get cached
    await store.commit(warm, session_for("100"))

    await redis_client.config_resetstat()
    locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    await store.commit(locked, session_for("100", turns=2))
    stats = await redis_client.info("commandstats")
    calls = {
        name: value["calls"]
        for name, value in stats.items()
        if name not in ("cmdstat_config|resetstat", "cmdstat_info")
    }
    assert calls.pop("cmdstat_evalsha") == 2
    assert set(calls) <= SCRIPT_INTERNAL, calls


@pytest.mark.parametrize("answered", [True, False])
async def test_only_an_answered_jobs_commit_ends_the_run_of_failed_turns(
    redis_client, answered: bool
):
    """The handoff's streak ends inside the turn's commit: no command of its own per turn."""
    store = make_store(redis_client)
    keys = store.keys("100")
    await redis_client.rpush(keys.queue, "job-1")
    await redis_client.set(keys.lease, "token")
    await redis_client.sadd(keys.failed_streak, "T1", "T2")
    locked = await store.held("100", "token", "", "")
    completion = JobCompletion(job_raw="job-1", job_id="1", outbox_entry="{}", answered=answered)

    await store.commit(locked, session_for("100"), completion=completion, release=False)

    assert await redis_client.exists(keys.failed_streak) == (0 if answered else 1)
    assert await redis_client.llen(keys.queue) == 0


async def test_the_handoff_state_is_mirrored_for_intake_and_goes_with_the_session(redis_client):
    """Intake reads the field (no JSON): set while a person has the chat."""
    store = make_store(redis_client)
    session_key = store.keys("100").session
    locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    await store.commit(locked, session_for("100").with_handoff("human", NOW))
    assert await redis_client.hget(session_key, "h") == b"human"

    locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    assert locked.session is not None
    await store.commit(locked, locked.session.with_handoff("bot", NOW))
    assert await redis_client.hexists(session_key, "h") == 0

    locked = await store.acquire("100", lease_seconds=5, wait_seconds=1)
    assert locked.session is not None
    await store.commit(locked, locked.session.with_handoff("waiting", NOW))
    assert await redis_client.hget(session_key, "h") == b"waiting"
    await store.archive(await store.acquire("100", lease_seconds=5, wait_seconds=1))
    assert await redis_client.exists(session_key) == 0


async def test_an_unreachable_redis_is_reported_as_unavailable(own_redis_server: RedisServer):
    client = aioredis.Redis.from_url(
        own_redis_server.url, socket_timeout=1, socket_connect_timeout=1
    )
    store = make_store(client)
    own_redis_server.stop()
    try:
        with pytest.raises(SessionStoreUnavailableError):
            await store.acquire("100", lease_seconds=5, wait_seconds=1)
        with pytest.raises(SessionStoreUnavailableError):
            await store.load("100")
    finally:
        await client.aclose()


async def test_reading_a_corrupt_entry_without_the_lease_says_so_in_the_log(
    redis_client, caplog: pytest.LogCaptureFixture
):
    store = make_store(redis_client)
    await redis_client.hset(
        store.keys("100").session, mapping={"v": "3", "d": '{"secret": "SECRET-TEXT"'}
    )
    with caplog.at_level(logging.WARNING):
        assert await store.load("100") is None
    assert "Session of 100 is unreadable" in caplog.text
    assert "SECRET-TEXT" not in caplog.text


async def test_an_identical_commit_by_a_worker_that_lost_the_chat_is_not_taken_for_its_own(
    redis_client,
):
    """A frozen worker whose lease expired computes the same session as its taker.

    Its late commit must fail (the chat moved on under another token), not pass as
    "saved before": a repeated run is recognised by the token that saved it, not by
    equal content (a deterministic model answers both workers alike).
    """
    store = make_store(redis_client)
    frozen = await store.acquire("300", lease_seconds=30, wait_seconds=1)
    # Its lease expires while it is frozen (SIGSTOP): the key is gone.
    await redis_client.delete(RedisKeys("t").conversation("300").lease)
    taker = await store.acquire("300", lease_seconds=30, wait_seconds=1)
    same = session_for("300", turns=1)
    await store.commit(taker, same)

    with pytest.raises(SessionConflictError):
        await store.commit(frozen, same)


async def test_a_frozen_workers_commit_of_a_job_its_taker_answered_is_refused(redis_client):
    """The taker answered the same job and has not yet delivered it (its outbox entry is
    there): the frozen worker's late commit of that job must fail, not read the taker's
    entry as its own earlier save and send the answer a second time."""
    store = make_store(redis_client)
    chat = RedisKeys("t").conversation("302")
    job = json.dumps({"job_id": "1", "update_id": 1})
    await redis_client.rpush(chat.queue, job)
    await redis_client.set(chat.lease, "frozen-token")
    frozen = await store.held("302", "frozen-token", "", "")
    # Its lease expires while it is frozen (SIGSTOP); another worker takes the chat.
    await redis_client.set(chat.lease, "taker-token")
    taker = await store.held("302", "taker-token", "", "")
    same = session_for("302", turns=1)
    completion = JobCompletion(job_raw=job, job_id="1", outbox_entry='{"answer": 1}')
    await store.commit(taker, same, completion=completion, release=False)

    with pytest.raises(SessionLeaseLostError):
        await store.commit(frozen, same, completion=completion, release=False)
    assert await redis_client.hgetall(chat.outbox) == {b"1": b'{"answer": 1}'}
    assert await redis_client.get(chat.lease) == b"taker-token"


async def test_a_repeated_commit_of_a_job_by_the_same_holder_still_succeeds(redis_client):
    store = make_store(redis_client)
    chat = RedisKeys("t").conversation("303")
    job = json.dumps({"job_id": "1", "update_id": 1})
    await redis_client.rpush(chat.queue, job)
    await redis_client.set(chat.lease, "holder")
    locked = await store.held("303", "holder", "", "")
    completion = JobCompletion(job_raw=job, job_id="1", outbox_entry='{"answer": 1}')
    await store.commit(locked, session_for("303"), completion=completion, release=False)

    # A retry after a lost reply: no error, nothing popped twice.
    await store.commit(locked, session_for("303"), completion=completion, release=False)
    assert await redis_client.hgetall(chat.outbox) == {b"1": b'{"answer": 1}'}


async def test_a_repeated_commit_by_the_same_holder_still_succeeds(redis_client):
    store = make_store(redis_client)
    locked = await store.acquire("301", lease_seconds=30, wait_seconds=1)
    session = session_for("301", turns=1)
    await store.commit(locked, session)

    await store.commit(locked, session)  # a retry after a lost reply: no error

    relocked = await store.acquire("301", lease_seconds=30, wait_seconds=1)
    assert (relocked.session, relocked.version) == (session, "1")
