"""A wrong model at start-up: the bot starts, says degraded and why, and tells customers the truth.

The real polling runner against the fake Bot API, the scripted OpenAI-compatible
server and a real redis-server; ``/healthz`` and ``/metrics`` over HTTP.
"""

from typing import Any

import aiohttp
import pytest

from bot.testing.openai_server import Reply, ScriptedOpenAIServer, error, text_answer
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer, free_port
from bot.testing.settings import stack_settings
from bot.testing.telegram_server import FakeTelegramServer
from tests.queue.echo_pool import wait_until_redis
from tests.telegram.test_observability import scrape, value

pytestmark = pytest.mark.timeout(120)

CHAT = 4600
NOT_FOUND = error(
    404,
    "The model `gpt-nope` does not exist or you do not have access to it.",
    code="model_not_found",
    error_type="invalid_request_error",
)


async def healthz(port: int) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/healthz") as response,
    ):
        return response.status, await response.json()


async def test_a_model_not_found_is_degraded_with_its_reason_and_customers_read_the_truth(
    telegram: FakeTelegramServer, redis_server: RedisServer, redis_client: Any
) -> None:
    port = free_port()
    async with ScriptedOpenAIServer() as model:
        failing = True

        def probe(_body: Any) -> Reply:
            return NOT_FOUND if failing else text_answer("ok")

        model.probe_responder = probe
        settings = stack_settings(
            telegram,
            model,
            redis_server.url,
            prefix="modelhealth",
            HEALTH_PORT=port,
            LLM_PROBE_SECONDS=0.2,
        )
        bot = PollingBot(settings, telegram)
        await bot.start()  # the start is not failed by the model
        try:
            latest: dict[str, Any] = {}

            async def degraded() -> bool:
                status, body = await healthz(port)
                latest.update(body, http_status=status)
                return body.get("model") == "misconfigured"

            await wait_until_redis(degraded, 20, "/healthz says the model is misconfigured")
            assert latest["status"] == "degraded"
            assert latest["http_status"] == 200  # the bot still serves
            assert "404" in latest["model_detail"]
            assert "LLM_MODEL" in latest["model_detail"]
            samples = await scrape(port)
            assert value(samples, "support_model_state", state="misconfigured") == 1
            assert value(samples, "support_model_state", state="ok") == 0

            model.script(NOT_FOUND)
            await telegram.push_message(CHAT, "Где мой заказ?")
            texts = await telegram.wait_for_texts(CHAT, 1)
            assert texts[0].startswith("Сейчас я не могу ответить из-за ошибки в настройках бота.")
            assert "перегружен" not in texts[0]

            failing = False

            async def recovered() -> bool:
                _, body = await healthz(port)
                return body["status"] == "ok" and "model" not in body

            await wait_until_redis(recovered, 30, "/healthz says ok again")
            samples = await scrape(port)
            assert value(samples, "support_model_state", state="ok") == 1
        finally:
            assert await bot.stop() == 0
    assert model.unscripted == []
