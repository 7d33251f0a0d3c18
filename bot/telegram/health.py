"""``GET /healthz`` on the webhook server: for the load balancer and for operators."""

from aiohttp import web

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.redis_health import RedisHealthProbe
from bot.telegram.middlewares.inflight import InFlightMiddleware

HEALTH_PATH = "/healthz"


class HealthEndpoint:
    """200 only while the Redis node(s) in use are writable masters, 503 otherwise.

    The body carries the counters staff watch; ``lost_audit_entries`` counts
    audit entries Redis refused since the process started (each loss is also
    logged with the entries themselves).
    """

    def __init__(
        self,
        probe: RedisHealthProbe,
        audit: RedisStreamAuditSink,
        in_flight: InFlightMiddleware,
    ) -> None:
        self._probe = probe
        self._audit = audit
        self._in_flight = in_flight

    async def handle(self, request: web.Request) -> web.Response:
        """Probe Redis (role and a write) and report."""
        health = await self._probe.check()
        body = {
            "status": "ok" if health.writable else "degraded",
            "redis": health.writable,
            "redis_detail": health.detail,
            "in_flight": self._in_flight.in_flight,
            "lost_audit_entries": self._audit.lost_entries,
        }
        return web.json_response(body, status=200 if health.writable else 503)
