"""The webhook server's health endpoint, over HTTP, with a Redis that comes and goes."""

import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.queue.work_stream import WorkStream
from bot.telegram.health import HEALTH_PATH, HealthEndpoint
from bot.telegram.middlewares.inflight import InFlightMiddleware
from bot.testing.redis_server import RedisServer


async def test_health_is_ok_with_redis_and_503_while_redis_is_down(
    own_redis_server: RedisServer,
):
    client = aioredis.Redis.from_url(
        own_redis_server.url, socket_timeout=1, socket_connect_timeout=1
    )
    sink = RedisStreamAuditSink(client, stream="h:audit", maxlen=1000, timeout_seconds=1)
    web_app = web.Application()
    work = WorkStream(client, stream="h:work", consumer="health-test")
    await work.ensure_group()
    endpoint = HealthEndpoint(client, sink, InFlightMiddleware(), work)
    web_app.router.add_get(HEALTH_PATH, endpoint.handle)
    async with TestClient(TestServer(web_app)) as http:
        response = await http.get(HEALTH_PATH)
        assert response.status == 200
        assert await response.json() == {
            "status": "ok",
            "redis": True,
            "in_flight": 0,
            "queue_depth": 0,
            "oldest_queued_seconds": 0.0,
            "lost_audit_entries": 0,
        }

        # Two chats signalled, one of them taken by a worker and not finished yet.
        await work.signal("tg:1")
        await work.signal("tg:2")
        assert len(await work.read(count=1, block_ms=100)) == 1
        body = await (await http.get(HEALTH_PATH)).json()
        assert body["queue_depth"] == 2
        assert 0 <= body["oldest_queued_seconds"] < 60

        own_redis_server.stop()
        response = await http.get(HEALTH_PATH)
        assert response.status == 503
        assert (await response.json())["status"] == "degraded"
    await client.aclose()
