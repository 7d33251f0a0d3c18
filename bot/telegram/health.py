"""``GET /healthz``: for the load balancer and for operators (every mode serves it)."""

import time

from aiohttp import web
from redis.exceptions import RedisError

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.queue.work_stream import WorkStream
from bot.redis_health import RedisHealthProbe
from bot.telegram.middlewares.inflight import InFlightMiddleware

HEALTH_PATH = "/healthz"


class HealthEndpoint:
    """200 only while the Redis node(s) in use are writable masters, 503 otherwise.

    ``queue_depth`` counts the chats with queued work that no worker has
    finished (waiting for a worker, or being drained); ``oldest_queued_seconds``
    is how long the oldest of them has waited since its work was signalled
    (both ``null`` when Redis cannot say). ``lost_audit_entries`` counts audit
    entries dropped for good since the process started (each loss is also
    logged with the entries themselves); ``pending_audit_entries`` those held in
    this process's memory while Redis does not take them (written with the next
    entry that goes through; lost if the process dies first). The probe and the backlog use a small
    client of their own, so the answer never waits behind turns for a connection.
    """

    def __init__(
        self,
        probe: RedisHealthProbe,
        audit: RedisStreamAuditSink,
        in_flight: InFlightMiddleware,
        work: WorkStream,
    ) -> None:
        self._probe = probe
        self._audit = audit
        self._in_flight = in_flight
        self._work = work

    async def handle(self, request: web.Request) -> web.Response:
        """Probe Redis (role and a write), read the backlog, and report."""
        health = await self._probe.check()
        queue_depth: int | None = None
        oldest: float | None = None
        if health.writable:
            try:
                backlog = await self._work.backlog(int(time.time() * 1000))
                queue_depth, oldest = backlog.chats, round(backlog.oldest_seconds, 3)
            except (RedisError, OSError):
                pass
        body = {
            "status": "ok" if health.writable else "degraded",
            "redis": health.writable,
            "redis_detail": health.detail,
            "in_flight": self._in_flight.in_flight,
            "queue_depth": queue_depth,
            "oldest_queued_seconds": oldest,
            "lost_audit_entries": self._audit.lost_entries,
            "pending_audit_entries": self._audit.pending_entries,
        }
        return web.json_response(body, status=200 if health.writable else 503)
