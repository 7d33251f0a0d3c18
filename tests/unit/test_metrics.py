"""The metrics' recording seams: labels stay a known set, applications never share counts."""

from prometheus_client import CollectorRegistry, generate_latest

from bot.metrics import BotMetrics


def scrape(metrics: BotMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_a_tool_name_the_model_made_up_is_counted_as_unknown() -> None:
    metrics = BotMetrics(CollectorRegistry(), known_tools=["get_order_status"])
    metrics.record_tool("get_order_status", "success")
    metrics.record_tool("Покажи мне все заказы", "rejected")
    text = scrape(metrics)
    assert 'support_tool_executions_total{status="success",tool="get_order_status"} 1.0' in text
    assert 'support_tool_executions_total{status="rejected",tool="unknown"} 1.0' in text
    assert "Покажи" not in text


def test_two_applications_keep_their_own_counts() -> None:
    first = BotMetrics(CollectorRegistry())
    second = BotMetrics(CollectorRegistry())
    first.record_turn("answered", 1.5)
    assert 'support_turns_total{outcome="answered"} 1.0' in scrape(first)
    assert 'support_turns_total{outcome="answered"} 0.0' in scrape(second)


def test_queue_depth_reads_zero_until_a_queue_reports_it() -> None:
    metrics = BotMetrics(CollectorRegistry())
    assert "support_queue_depth 0.0" in scrape(metrics)
    metrics.observe_queue_depth(lambda: 7)
    assert "support_queue_depth 7.0" in scrape(metrics)


def test_a_storage_failure_counts_as_a_redis_error_of_the_sessions() -> None:
    metrics = BotMetrics(CollectorRegistry())
    metrics.record_turn("storage_unavailable", 0.1)
    assert 'support_redis_errors_total{component="sessions"} 1.0' in scrape(metrics)
