"""``GET /healthz`` on the webhook server: for the load balancer and for operators."""

import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import RedisError

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.telegram.middlewares.inflight import InFlightMiddleware

HEALTH_PATH = "/healthz"


class HealthEndpoint:
    """200 while Redis answers, 503 otherwise; the body carries the counters staff watch.

    ``lost_audit_entries`` counts audit entries Redis refused since the process
    started (each loss is also logged with the entries themselves).
    """

    def __init__(
        self,
        redis: "aioredis.Redis",
        audit: RedisStreamAuditSink,
        in_flight: InFlightMiddleware,
    ) -> None:
        self._redis = redis
        self._audit = audit
        self._in_flight = in_flight

    async def handle(self, request: web.Request) -> web.Response:
        """Ping Redis and report."""
        try:
            redis_ok = bool(await self._redis.ping())
        except (RedisError, OSError):
            redis_ok = False
        body = {
            "status": "ok" if redis_ok else "degraded",
            "redis": redis_ok,
            "in_flight": self._in_flight.in_flight,
            "lost_audit_entries": self._audit.lost_entries,
        }
        return web.json_response(body, status=200 if redis_ok else 503)
