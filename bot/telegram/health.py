"""``GET /healthz`` on the webhook server: for the load balancer and for operators."""

import time

import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import RedisError

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.queue.work_stream import WorkStream
from bot.telegram.middlewares.inflight import InFlightMiddleware

HEALTH_PATH = "/healthz"


class HealthEndpoint:
    """200 while Redis answers, 503 otherwise; the body carries the counters staff watch.

    ``queue_depth`` counts the chats with queued work that no worker has
    finished (waiting for a worker, or being drained); ``oldest_queued_seconds``
    is how long the oldest of them has waited since its work was signalled.
    ``lost_audit_entries`` counts audit entries Redis refused since the process
    started (each loss is also logged with the entries themselves).
    """

    def __init__(
        self,
        redis: "aioredis.Redis",
        audit: RedisStreamAuditSink,
        in_flight: InFlightMiddleware,
        work: WorkStream,
    ) -> None:
        self._redis = redis
        self._audit = audit
        self._in_flight = in_flight
        self._work = work

    async def handle(self, request: web.Request) -> web.Response:
        """Ping Redis, read the backlog and report."""
        queue_depth: int | None = None
        oldest: float | None = None
        try:
            redis_ok = bool(await self._redis.ping())
            backlog = await self._work.backlog(int(time.time() * 1000))
            queue_depth, oldest = backlog.chats, round(backlog.oldest_seconds, 3)
        except (RedisError, OSError):
            redis_ok = False
        body = {
            "status": "ok" if redis_ok else "degraded",
            "redis": redis_ok,
            "in_flight": self._in_flight.in_flight,
            "queue_depth": queue_depth,
            "oldest_queued_seconds": oldest,
            "lost_audit_entries": self._audit.lost_entries,
        }
        return web.json_response(body, status=200 if redis_ok else 503)
