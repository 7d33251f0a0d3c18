"""The model's health: probed at start, asked again with growing pauses until it answers."""

import asyncio

import pytest

from bot.llm.errors import (
    LLMConfigurationError,
    LLMRateLimitError,
    LLMRequestError,
    LLMUnavailableError,
    LLMUnreachableError,
)
from bot.llm.health import ModelHealth
from tests.queue.echo_pool import wait_until

pytestmark = pytest.mark.timeout(30)


class Provider:
    """A probe whose answers a test sets: an error to raise, or ``None`` to answer."""

    def __init__(self) -> None:
        self.failure: Exception | None = None
        self.probes = 0
        self.asked = asyncio.Event()

    async def probe(self, timeout_seconds: float) -> None:
        self.probes += 1
        self.asked.set()
        if self.failure is not None:
            raise self.failure


async def settled(health: ModelHealth, state: str) -> None:
    await wait_until(lambda: health.reading().state == state, 10, f"the model {state}")


async def test_a_misconfigured_model_is_degraded_until_it_answers() -> None:
    provider = Provider()
    provider.failure = LLMConfigurationError(
        "LLM_MODEL gpt-nope is not known to the provider (404)"
    )
    health = ModelHealth(provider.probe, first_pause_seconds=0.01, timeout_seconds=1)
    assert health.reading().state == "unknown"
    health.start()
    try:
        await settled(health, "misconfigured")
        assert "gpt-nope" in (health.reading().reason or "")
        assert health.reading().degraded

        provider.failure = None
        await settled(health, "ok")
        assert health.reading().reason is None
        assert not health.reading().degraded
        # Answered: no more probes until a turn says otherwise.
        asked = provider.probes
        await asyncio.sleep(0.1)
        assert provider.probes == asked
    finally:
        await health.aclose()


@pytest.mark.parametrize(
    ("failure", "state"),
    [
        (LLMConfigurationError("401"), "misconfigured"),
        (LLMRequestError("400"), "misconfigured"),
        (LLMUnreachableError("refused"), "unreachable"),
        (LLMUnavailableError("503"), "unavailable"),
        (LLMRateLimitError("429"), "rate_limited"),
    ],
)
async def test_each_failure_has_its_state(failure: Exception, state: str) -> None:
    provider = Provider()
    provider.failure = failure
    health = ModelHealth(provider.probe, first_pause_seconds=10, timeout_seconds=1)
    health.start()
    try:
        await settled(health, state)
    finally:
        await health.aclose()


async def test_a_turn_that_meets_a_configuration_fault_degrades_and_a_success_recovers() -> None:
    provider = Provider()
    health = ModelHealth(provider.probe, first_pause_seconds=10, timeout_seconds=1)
    health.start()
    try:
        await settled(health, "ok")
        provider.failure = LLMConfigurationError("the model provider rejected OPENAI_API_KEY (401)")
        provider.asked.clear()

        health.failed(LLMConfigurationError("the model provider rejected OPENAI_API_KEY (401)"))

        assert health.reading().state == "misconfigured"
        async with asyncio.timeout(5):
            await provider.asked.wait()  # probing again
        health.succeeded()
        assert health.reading().state == "ok"
    finally:
        await health.aclose()


async def test_without_a_probe_the_model_counts_as_answering() -> None:
    health = ModelHealth(None)
    health.start()
    assert health.reading().state == "ok"
    await health.aclose()
