"""``GET /metrics``: the application's Prometheus metrics, in the text exposition format."""

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

METRICS_PATH = "/metrics"


class MetricsEndpoint:
    """Renders one registry (the application's own, never the process-wide default)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        before_scrape: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._registry = registry
        self._before_scrape = before_scrape

    async def handle(self, request: web.Request) -> web.Response:
        """The current values; rendering is in-memory and takes no lock a turn holds.

        ``before_scrape`` refreshes values read from Redis (the queue depth).
        """
        if self._before_scrape is not None:
            await self._before_scrape()
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
