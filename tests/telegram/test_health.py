"""The webhook server's health endpoint, over HTTP, with a Redis that comes and goes."""

import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bot.audit.redis_sink import RedisStreamAuditSink
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
    endpoint = HealthEndpoint(client, sink, InFlightMiddleware())
    web_app.router.add_get(HEALTH_PATH, endpoint.handle)
    async with TestClient(TestServer(web_app)) as http:
        response = await http.get(HEALTH_PATH)
        assert response.status == 200
        assert await response.json() == {
            "status": "ok",
            "redis": True,
            "in_flight": 0,
            "lost_audit_entries": 0,
        }

        own_redis_server.stop()
        response = await http.get(HEALTH_PATH)
        assert response.status == 503
        assert (await response.json())["status"] == "degraded"
    await client.aclose()
