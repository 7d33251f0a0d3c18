"""The health endpoint, over HTTP: 200 only on a writable master; a shop's MCP server named.

The MCP test goes through the real runner's wiring (``bot/telegram/process.py``) to
a real MCP server process.
"""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.queue.work_stream import WorkStream
from bot.settings import RedisSettings
from bot.storage.connection import AsyncRedisClient, RetryPolicy, async_client
from bot.storage.health import RedisHealthProbe
from bot.telegram.health import HEALTH_PATH, HealthEndpoint
from bot.telegram.middlewares.inflight import InFlightMiddleware
from bot.testing.mcp_process import McpServerProcess
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer, free_port
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer

WORK_STREAM = "h:work"


def _client(url: str) -> AsyncRedisClient:
    settings = RedisSettings(REDIS_URL=url, REDIS_SOCKET_TIMEOUT_SECONDS="1")
    return async_client(settings, retry=RetryPolicy(retries=0), pool_wait_seconds=1)


@pytest.fixture
async def health_client(own_redis_server: RedisServer) -> AsyncIterator[AsyncRedisClient]:
    """A client of this test's own Redis."""
    client = _client(own_redis_server.url)
    yield client
    await client.aclose()


@pytest.fixture
def audit_sink(health_client: AsyncRedisClient) -> RedisStreamAuditSink:
    """The audit sink the endpoint reports on."""
    return RedisStreamAuditSink(health_client, stream="h:audit", maxlen=1000, timeout_seconds=1)


@dataclass
class ManualClock:
    """A monotonic clock that moves only when a test moves it."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> ManualClock:
    """The health endpoint's clock."""
    return ManualClock()


@pytest.fixture
async def health_http(
    health_client: AsyncRedisClient, audit_sink: RedisStreamAuditSink, clock: ManualClock
) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    """The health endpoint over HTTP, probing this test's own Redis."""
    probe = RedisHealthProbe(health_client, key_prefix="h", timeout_seconds=1)
    work = WorkStream(health_client, stream=WORK_STREAM, consumer="health-test")
    await work.ensure_group()
    web_app = web.Application()
    endpoint = HealthEndpoint(
        probe=probe, audit=audit_sink, in_flight=InFlightMiddleware(), work=work, clock=clock
    )
    web_app.router.add_get(HEALTH_PATH, endpoint.handle)
    async with TestClient(TestServer(web_app)) as http:
        yield http


async def test_health_is_ok_with_redis_and_503_while_redis_is_down(
    health_http: "TestClient[web.Request, web.Application]",
    own_redis_server: RedisServer,
    clock: ManualClock,
):
    response = await health_http.get(HEALTH_PATH)
    assert response.status == 200
    assert await response.json() == {
        "status": "ok",
        "redis": True,
        "redis_detail": "writable master",
        "in_flight": 0,
        "queue_depth": 0,
        "oldest_queued_seconds": 0.0,
        "lost_audit_entries": 0,
        "pending_audit_entries": 0,
    }

    # Two chats signalled, one of them taken by a worker and not finished yet.
    admin = _client(own_redis_server.url)
    work = WorkStream(admin, stream=WORK_STREAM, consumer="w")
    await work.signal("tg:1")
    await work.signal("tg:2")
    assert len(await work.read(count=1, block_ms=100)) == 1
    clock.now += 1.0
    body = await (await health_http.get(HEALTH_PATH)).json()
    assert body["queue_depth"] == 2
    assert 0 <= body["oldest_queued_seconds"] < 60

    own_redis_server.stop()
    clock.now += 1.0
    response = await health_http.get(HEALTH_PATH)
    assert response.status == 503
    assert (await response.json())["status"] == "degraded"
    await admin.aclose()


async def test_a_master_out_of_memory_with_noeviction_is_unhealthy(
    health_http: "TestClient[web.Request, web.Application]",
    own_redis_server: RedisServer,
    clock: ManualClock,
):
    admin = _client(own_redis_server.url)
    await admin.config_set("maxmemory-policy", "noeviction")
    used = int((await admin.info("memory"))["used_memory"])
    await admin.config_set("maxmemory", str(used + 512 * 1024))
    # Fill until Redis refuses writes.
    for batch in range(200):
        try:
            await admin.set(f"filler:{batch}", b"x" * 64 * 1024)
        except Exception:
            break
    response = await health_http.get(HEALTH_PATH)
    assert response.status == 503
    # The kind of error, never redis-py's text.
    assert (await response.json())["redis_detail"] == "refuses writes: OutOfMemoryError"

    await admin.config_set("maxmemory", "0")
    clock.now += 1.0
    assert (await health_http.get(HEALTH_PATH)).status == 200
    await admin.aclose()


async def test_a_replica_is_unhealthy(own_redis_server: RedisServer):
    replica = RedisServer(extra_args=["--replicaof", "127.0.0.1", str(own_redis_server.port)])
    replica.start()
    client = _client(replica.url)
    try:
        health = await RedisHealthProbe(client, key_prefix="h", timeout_seconds=1).check()
        assert not health.writable
        assert health.detail == "this is a read-only replica"
    finally:
        await client.aclose()
        replica.close()


async def test_audit_entries_waiting_in_the_process_for_redis_are_reported(
    health_http: "TestClient[web.Request, web.Application]",
    audit_sink: RedisStreamAuditSink,
    own_redis_server: RedisServer,
):
    """Entries Redis did not take are held in memory: operators see how many would go."""
    own_redis_server.stop()
    await audit_sink.write_fields(
        [{"type": "turn", "turn_id": "T1", "chat_id": "77", "outcome": "answered"}]
    )
    response = await health_http.get(HEALTH_PATH)
    body = await response.json()

    assert response.status == 503
    assert (body["pending_audit_entries"], body["lost_audit_entries"]) == (1, 0)


async def _command_calls(admin: AsyncRedisClient) -> dict[str, int]:
    """Calls per command since the last ``CONFIG RESETSTAT``, as the server counts them."""
    stats = await admin.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in stats.items()
        if isinstance(value, dict)
    }


async def test_requests_within_a_second_share_one_probe_of_redis(
    health_http: "TestClient[web.Request, web.Application]",
    own_redis_server: RedisServer,
    clock: ManualClock,
):
    """A burst of ``/healthz`` costs Redis one probe a second, not one per request."""
    admin = _client(own_redis_server.url)
    await admin.config_resetstat()

    burst = await asyncio.gather(*(health_http.get(HEALTH_PATH) for _ in range(20)))
    for _ in range(20):
        burst.append(await health_http.get(HEALTH_PATH))
    clock.now += 0.999
    burst.append(await health_http.get(HEALTH_PATH))

    assert {response.status for response in burst} == {200}
    calls = await _command_calls(admin)
    assert (calls.get("role"), calls.get("set"), calls.get("xinfo|groups")) == (1, 1, 1)

    clock.now += 0.001
    assert (await health_http.get(HEALTH_PATH)).status == 200
    calls = await _command_calls(admin)
    assert (calls.get("role"), calls.get("set"), calls.get("xinfo|groups")) == (2, 2, 2)
    await admin.aclose()


async def test_redis_detail_names_the_kind_of_error_never_its_text(
    own_redis_server: RedisServer,
):
    """redis-py's text names hosts, ports and settings: ``/healthz`` is no place for it."""
    admin = _client(own_redis_server.url)
    probe = RedisHealthProbe(admin, key_prefix="h", timeout_seconds=1)
    await admin.config_set("min-replicas-to-write", "1")
    refused = await probe.check()
    await admin.config_set("min-replicas-to-write", "0")
    own_redis_server.stop()
    unreachable = await probe.check()
    await admin.aclose()

    assert (refused.writable, refused.detail) == (False, "refuses writes: ResponseError NOREPLICAS")
    assert (unreachable.writable, unreachable.detail) == (False, "unreachable: ConnectionError")


async def _health(port: int) -> tuple[int, dict[str, Any]]:
    """``/healthz`` of a bot's health port: the status and the body."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}{HEALTH_PATH}") as response,
    ):
        return response.status, await response.json()


async def _health_until(port: int, wanted: Callable[[dict[str, Any]], bool], what: str) -> int:
    """Ask ``/healthz`` until its body is ``wanted``; its status then (fails naming ``what``)."""
    try:
        async with asyncio.timeout(60):
            while True:
                status, body = await _health(port)
                if wanted(body):
                    return status
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"not within 60 s: {what}") from None


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_shop_mcp_server_down_is_named_and_the_answer_stays_200(
    telegram: FakeTelegramServer, redis_server: RedisServer, tmp_path: Path, protocol: str
) -> None:
    """The real runner's ``/healthz`` against a real MCP server process: down, up, killed.

    A legacy session holds no stream open between calls: only the idle session's ping
    finds its server dead (without it ``/healthz`` said ``ok`` for as long as one waited).
    The protocol dropped ping in its 2026 revision (the SDK refuses it outside legacy
    mode), and a newer session's death between calls is not found either yet.
    """
    shop = McpServerProcess(tmp_path / "calls.jsonl")  # its port is chosen; not started yet
    port = free_port()
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="health-mcp",
        AUDIT_STREAM="health-mcp:audit",
        HEALTH_PORT=port,
        MCP_SERVERS=json.dumps(
            [{"name": "shop", "url": shop.url, "ping_seconds": 0.5, "protocol": protocol}]
        ),
    )
    bot = PollingBot(settings, telegram)
    await bot.start()
    try:
        status, body = await _health(port)
        # The bot still serves: only the shop's tools are missing.
        assert status == 200
        assert body["status"] == "degraded"
        assert body["mcp_servers_down"] == ["shop"]

        await asyncio.to_thread(shop.start)
        status = await _health_until(
            port, lambda body: body["status"] == "ok", "the shop's server found up"
        )
        assert status == 200
        _, body = await _health(port)
        assert "mcp_servers_down" not in body

        if protocol != "legacy":
            return  # a newer session has no ping (see the docstring)
        # Killed between calls: the idle session's ping finds it, no customer's call needed.
        await asyncio.to_thread(shop.kill)
        status = await _health_until(
            port,
            lambda body: body.get("mcp_servers_down") == ["shop"],
            "the shop's server found down after it died while idle",
        )
        assert status == 200
    finally:
        assert await bot.stop() == 0
        shop.kill()
