"""The monitoring stack in the repository: it queries what the bot exports, and fits together.

Docker is not needed: the dashboard's PromQL is checked against the names in
the registry the application really builds, and ``docker-compose.yml``, the
Prometheus config and Grafana's provisioning are read and cross-checked (the
paths the containers are given exist, the names they use for each other are
the compose services', the ports are the ones the bot listens on).
"""

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from prometheus_client import CollectorRegistry

from bot.app import build_application
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
DASHBOARD = MONITORING / "grafana" / "dashboards" / "support-bot.json"

# Sample names a family exports, by its type (prometheus_client's names, without suffix).
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "gauge": ("",),
    "info": ("_info",),
}
PROMQL_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "atan2"})


def queried_metrics(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (not functions, labels, keywords)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges, Grafana's $__rate_interval among them
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\$\w+", "", text)  # Grafana variables
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function: sum(, rate(, histogram_quantile(
        if match.group() not in PROMQL_KEYWORDS:
            names.add(match.group())
    return names


def exported_names(registry: CollectorRegistry) -> set[str]:
    """Every sample name the registry can expose, labelled children created or not."""
    names: set[str] = set()
    for family in registry.collect():
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def load_dashboard() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return dashboard


def all_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def queries(dashboard: dict[str, Any]) -> list[str]:
    return [
        target["expr"] for panel in all_panels(dashboard) for target in panel.get("targets", [])
    ]


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def bot_registry(redis_server: RedisServer) -> CollectorRegistry:
    """The registry ``build_application`` fills, as a running process exports it."""

    async def build() -> CollectorRegistry:
        settings = make_settings(
            REDIS_URL=redis_server.url,
            REDIS_KEY_PREFIX="dashboard-test",
            AUDIT_STREAM="dashboard-test:audit",
        )
        app = await build_application(settings)
        try:
            # Registered by the Telegram dispatcher (aiogram, too slow to import here).
            app.metrics.observe_in_flight(lambda: 0)
            return app.metrics.registry
        finally:
            await app.aclose()

    return asyncio.run(build())


def test_every_metric_the_dashboard_queries_is_one_the_bot_exports(bot_registry):
    exported = exported_names(bot_registry)
    queried = {name for expr in queries(load_dashboard()) for name in queried_metrics(expr)}

    assert queried - exported == set()
    # Not vacuous: the panels of the issue are there.
    assert {
        "support_turns_total",
        "support_turn_duration_seconds_bucket",
        "support_model_request_duration_seconds_bucket",
        "support_update_queue_seconds_bucket",
        "support_queue_depth",
        "support_tool_executions_total",
        "support_redis_errors_total",
        "support_audit_entries_lost_total",
        "support_handoffs_opened_total",
        "support_handoff_first_reply_seconds_bucket",
    } <= queried


def test_a_misspelt_metric_would_be_caught(bot_registry):
    names = queried_metrics(
        'histogram_quantile(0.95, sum by (le) (rate(support_turn_seconds_bucket{job="x"}[5m])))'
        " / on (instance) support_queue_depth"
    )
    assert names == {"support_turn_seconds_bucket", "support_queue_depth"}
    assert names - exported_names(bot_registry) == {"support_turn_seconds_bucket"}


def test_every_panel_says_what_it_shows_and_queries_the_provisioned_datasource():
    dashboard = load_dashboard()
    datasources = load_yaml(MONITORING / "grafana/provisioning/datasources/prometheus.yml")
    (datasource,) = datasources["datasources"]
    panels = [panel for panel in all_panels(dashboard) if panel["type"] != "row"]
    ids = [panel["id"] for panel in all_panels(dashboard)]

    assert len(ids) == len(set(ids))
    for panel in panels:
        assert panel["description"], panel["title"]
        assert panel["targets"], panel["title"]
        for source in (panel["datasource"], *(t["datasource"] for t in panel["targets"])):
            assert source == {"type": datasource["type"], "uid": datasource["uid"]}


def test_the_operations_page_describes_every_panel():
    page = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = page.split("\n## The dashboard\n", 1)[1].split("\n## ", 1)[0]
    for panel in all_panels(load_dashboard()):
        if panel["type"] != "row":
            assert f"**{panel['title']}**" in section, panel["title"]


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """A service's bind mounts: container path -> path in the repository."""
    found = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            found[target] = source
    return found


def test_the_monitoring_profile_fits_the_bot_and_the_provisioning_together():
    compose = load_yaml(ROOT / "docker-compose.yml")
    services = compose["services"]
    bot = services["bot"]
    prometheus = services["prometheus"]
    grafana = services["grafana"]

    # Only the two new services are in the profile: a plain `up` is what it was.
    assert "profiles" not in services["redis"]
    assert "profiles" not in bot
    assert prometheus["profiles"] == ["monitoring"] == grafana["profiles"]
    for service in services.values():
        if "image" in service:
            assert re.fullmatch(r"[\w./-]+:v?\d+\.\d+\.\d+(-[\w.]+)?", service["image"])
    for service in (prometheus, grafana):
        for target, source in mounts(service).items():
            assert (ROOT / source).exists(), f"{source} (mounted at {target})"
        for volume in service["volumes"]:
            name = volume.split(":")[0]
            assert name.startswith("./") or name in compose["volumes"]

    # Prometheus scrapes the bot's health port, which listens beyond the container's loopback.
    config_path = mounts(prometheus)["/etc/prometheus/prometheus.yml"]
    (job,) = load_yaml(ROOT / config_path)["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    ((target,),) = (group["targets"] for group in job["static_configs"])
    host, port = target.split(":")
    assert services[host] is bot
    assert bot["environment"]["HEALTH_HOST"] == "0.0.0.0"  # noqa: S104 - inside the container
    assert bot["environment"]["HEALTH_PORT"] == port

    # Grafana: its provisioning, a datasource that is the compose Prometheus, the dashboards.
    grafana_mounts = mounts(grafana)
    provisioning = ROOT / grafana_mounts["/etc/grafana/provisioning"]
    (datasource,) = load_yaml(provisioning / "datasources" / "prometheus.yml")["datasources"]
    url = urlsplit(datasource["url"])
    assert services[url.hostname or ""] is prometheus
    assert f"127.0.0.1:{url.port}:{url.port}" in prometheus["ports"]
    (provider,) = load_yaml(provisioning / "dashboards" / "support-bot.yml")["providers"]
    dashboards_dir = ROOT / grafana_mounts[provider["options"]["path"]]
    assert dashboards_dir.resolve() == DASHBOARD.parent.resolve()
    home = Path(grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert (ROOT / grafana_mounts[str(home.parent)] / home.name).resolve() == DASHBOARD.resolve()
