"""``GET /healthz``: for the load balancer and for operators (every mode serves it)."""

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web
from redis.exceptions import RedisError

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.llm.health import ModelReading
from bot.ops.supervision import TaskSupervisor
from bot.queue.work_stream import WorkStream
from bot.storage.health import RedisHealth, RedisHealthProbe
from bot.telegram.middlewares.inflight import InFlightMiddleware

HEALTH_PATH = "/healthz"


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisReading:
    """What one probe of Redis said: health, and the backlog while Redis is writable."""

    health: RedisHealth
    queue_depth: int | None
    oldest_queued_seconds: float | None


@dataclass(kw_only=True)
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
    client of their own, so the answer never waits behind turns for a connection. Requests
    within ``max_age_seconds`` of a probe share its reading (and concurrent ones one probe):
    a burst of requests costs Redis a few commands a second, not a few per request.
    ``tasks`` names the supervised tasks that are not simply running (retrying
    while Redis refuses, restarting after a crash, or failed): a task restarting
    or failed also makes the answer 503 (see :mod:`bot.ops.supervision`).
    """

    probe: RedisHealthProbe
    audit: RedisStreamAuditSink
    in_flight: InFlightMiddleware
    work: WorkStream
    max_age_seconds: float = 1.0
    clock: Callable[[], float] = time.monotonic
    tasks: TaskSupervisor | None = None
    # The shop MCP servers without a session now: named, the answer stays 200 (the bot
    # still serves; only those servers' tools are missing), its status says degraded.
    mcp_down: Callable[[], tuple[str, ...]] = lambda: ()
    # Why each of them is down (a refused connection, rejected credentials), by name.
    mcp_detail: Callable[[], Mapping[str, str]] = lambda: {}
    # The chat model's reading: a known fault (a wrong key or model, an outage) keeps the
    # answer 200 (the bot still serves, and tells customers the truth) and says degraded.
    model: Callable[[], ModelReading] = lambda: ModelReading(state="ok")
    _reading: tuple[float, RedisReading] | None = field(default=None, init=False)
    _probing: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def redis_reading(self) -> RedisReading:
        """The last reading while younger than ``max_age_seconds``, else a new one."""
        async with self._probing:
            if self._reading is not None and self.clock() - self._reading[0] < self.max_age_seconds:
                return self._reading[1]
            reading = await self._read_redis()
            self._reading = (self.clock(), reading)
            return reading

    async def _read_redis(self) -> RedisReading:
        """Probe Redis (role and a write) and read the backlog."""
        health = await self.probe.check()
        queue_depth: int | None = None
        oldest: float | None = None
        if health.writable:
            try:
                backlog = await self.work.backlog(int(time.time() * 1000))
                queue_depth, oldest = backlog.chats, round(backlog.oldest_seconds, 3)
            except (RedisError, OSError):
                pass
        return RedisReading(health=health, queue_depth=queue_depth, oldest_queued_seconds=oldest)

    async def handle(self, request: web.Request) -> web.Response:
        """Report Redis's health and the backlog (read at most once a second), and the rest."""
        reading = await self.redis_reading()
        health = reading.health
        # A supervised task restarting after a crash, or given up, is this process's own fault.
        tasks_down = self.tasks.down() if self.tasks is not None else {}
        healthy = health.writable and not tasks_down
        mcp_down = self.mcp_down()
        model = self.model()
        body: dict[str, object] = {
            "status": "ok" if healthy and not mcp_down and not model.degraded else "degraded",
            "redis": health.writable,
            "redis_detail": health.detail,
            "in_flight": self.in_flight.in_flight,
            "queue_depth": reading.queue_depth,
            "oldest_queued_seconds": reading.oldest_queued_seconds,
            "lost_audit_entries": self.audit.lost_entries,
            "pending_audit_entries": self.audit.pending_entries,
        }
        if self.tasks is not None:
            body["tasks"] = self.tasks.states()
        if mcp_down:
            body["mcp_servers_down"] = list(mcp_down)
            detail = self.mcp_detail()
            body["mcp_detail"] = {name: detail[name] for name in mcp_down if name in detail}
        if model.state != "ok":
            body["model"] = model.state
            if model.reason:
                body["model_detail"] = model.reason
        return web.json_response(body, status=200 if healthy else 503)
