"""The one retry loop: what is retried, the pauses, and each retry counted by operation."""

import pytest
from prometheus_client import CollectorRegistry

from bot.metrics import BotMetrics
from bot.ops.retry import Backoff, retrying


class _Flaky:
    def __init__(self, failures: int) -> None:
        self.calls = 0
        self._failures = failures

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self._failures:
            raise ConnectionError(f"failure {self.calls}")
        return "done"


async def test_a_call_is_retried_after_the_pauses_decide_gives_and_each_retry_is_counted():
    metrics = BotMetrics(CollectorRegistry())
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    backoff = Backoff(first_seconds=0.1, longest_seconds=0.3)
    flaky = _Flaky(failures=3)
    result = await retrying(
        "probe",
        flaky,
        decide=lambda error, attempt: backoff.pause(attempt),
        counter=metrics,
        sleep=sleep,
    )
    assert (result, flaky.calls, slept) == ("done", 4, [0.1, 0.2, 0.3])
    assert metrics.registry.get_sample_value("support_retries_total", {"operation": "probe"}) == 3


async def test_what_decide_raises_ends_the_loop_uncounted_and_a_zero_pause_does_not_sleep():
    metrics = BotMetrics(CollectorRegistry())
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    def decide(error: Exception, attempt: int) -> float:
        if attempt >= 2:
            raise RuntimeError("given up") from error
        return 0.0

    flaky = _Flaky(failures=5)
    with pytest.raises(RuntimeError, match="given up") as raised:
        await retrying("probe", flaky, decide=decide, counter=metrics, sleep=sleep)
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert (flaky.calls, slept) == (2, [])
    assert metrics.registry.get_sample_value("support_retries_total", {"operation": "probe"}) == 1
