"""``GET /metrics``: the application's Prometheus metrics, in the text exposition format."""

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

METRICS_PATH = "/metrics"


class MetricsEndpoint:
    """Renders one registry (the application's own, never the process-wide default)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    async def handle(self, request: web.Request) -> web.Response:
        """The current values; rendering is in-memory and takes no lock a turn holds."""
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
