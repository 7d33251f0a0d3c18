"""Metrics over HTTP and JSON log lines, from the real bot on real sockets.

The bot runs against the fake Bot API, the scripted OpenAI server and a real
redis-server; ``/metrics`` is scraped over HTTP as Prometheus would, and the
JSON logs are read from a real ``python -m bot`` process's stderr.
"""

import asyncio
import json
import signal
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from bot.audit.pseudonym import chat_pseudonym
from bot.testing.openai_server import ScriptedOpenAIServer, error, text_answer, tool_call_answer
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer, free_port
from bot.testing.settings import stack_settings
from bot.testing.telegram_server import TEST_TOKEN, FakeTelegramServer
from bot.testing.warm_process import WarmLauncher
from tests.telegram.test_process import child_env

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse_metrics(text: str) -> Samples:
    """Every sample of a scrape, by name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; 0 when it is absent (a labelled counter not yet touched)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum over every sample of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))


async def scrape(port: int) -> Samples:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return parse_metrics(await response.text())


async def test_metrics_on_the_polling_health_port_move_with_turns(
    telegram: FakeTelegramServer, redis_server: RedisServer, redis_client
) -> None:
    port = free_port()
    async with ScriptedOpenAIServer() as model:
        settings = stack_settings(
            telegram, model, redis_server.url, prefix="metrics", HEALTH_PORT=port
        )
        bot = PollingBot(settings, telegram)
        await bot.start()
        try:
            before = await scrape(port)
            assert value(before, "support_turns_total", outcome="answered") == 0
            assert value(before, "support_queue_depth") == 0

            model.script(
                tool_call_answer("get_order_status", {"order_id": "8041"}),
                text_answer("Заказ передан в доставку."),
                text_answer("Пожалуйста."),
                error(500),
            )
            await telegram.push_message(10, "Где заказ 8041?")
            await telegram.wait_for_texts(10, 1)
            await telegram.push_message(10, "Спасибо")
            await telegram.wait_for_texts(10, 2)
            await telegram.push_message(10, "Ещё вопрос")
            await telegram.wait_for_texts(10, 3)

            after = await scrape(port)
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/healthz") as response,
            ):
                assert response.status == 200
        finally:
            assert await bot.stop() == 0

    assert value(after, "support_turns_total", outcome="answered") == 2
    assert value(after, "support_turns_total", outcome="model_unavailable") == 1
    assert value(after, "support_turn_duration_seconds_count") == 3
    assert value(after, "support_turn_duration_seconds_sum") > 0
    assert total(after, "support_tool_executions_total", tool="get_order_status") == 1
    assert value(after, "support_model_request_duration_seconds_count") == 4
    assert value(after, "support_model_request_errors_total", kind="unavailable") == 1
    assert total(after, "support_model_request_errors_total") == 1
    # Every update was timed on its way in: the three texts, at least.
    assert value(after, "support_update_queue_seconds_count") >= 3
    assert value(after, "support_updates_in_flight") == 0
    assert value(after, "support_audit_entries_lost_total") == 0
    assert ("support_audit_entries_pending", frozenset()) in after
    assert value(after, "support_audit_entries_pending") == 0
    assert total(after, "support_redis_errors_total") == 0


async def test_json_logs_parse_carry_the_turn_context_and_no_text(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, redis_client
) -> None:
    key = "k" * 32
    question = "Мой секретный вопрос про заказ"
    answer = "Тайный ответ модели"
    async with ScriptedOpenAIServer() as model:
        model.script(text_answer(answer), error(500))
        # Forked after the imports (bot.testing.warm_process): the claim is about its logs.
        log_path = tmp_path / "bot.log"
        process = await WarmLauncher().start(
            [],
            cwd=tmp_path,
            log_path=log_path,
            env=child_env(
                TELEGRAM_BOT_TOKEN=TEST_TOKEN,
                TELEGRAM_API_BASE_URL=telegram.base_url,
                LLM_BACKEND="openai",
                OPENAI_API_KEY="sk-test-do-not-log",
                OPENAI_BASE_URL=model.base_url,
                LLM_MAX_RETRIES=0,
                REDIS_URL=redis_server.url,
                REDIS_KEY_PREFIX="jsonlog",
                AUDIT_HMAC_KEY=key,
                LOG_FORMAT="json",
            ),
        )
        try:
            await telegram.wait_for(lambda: telegram.received("getUpdates") > 0, within=60)
            await telegram.push_message(30, question)
            await telegram.wait_for_texts(30, 1, within=30)
            failed_update = await telegram.push_message(30, f"{question} ещё раз")
            await telegram.wait_for_texts(30, 2, within=30)
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(20):
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    log = log_path.read_text(encoding="utf-8")
    assert process.returncode == 0, log
    lines = [line for line in log.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(record) for record in records)
    assert any("starting (polling)" in record["message"] for record in records)
    # A process of its own sets start-up's objects aside from garbage collection.
    settled = [record for record in records if record["logger"] == "bot.ops.heap"]
    assert len(settled) == 1
    assert int(settled[0]["message"].rsplit(": ", 1)[1]) > 100_000
    failed = [record for record in records if record.get("update_id") == failed_update]
    assert failed, "the failed turn logged nothing"
    for record in failed:
        assert record["chat"] == chat_pseudonym("30", key.encode())
        assert record["turn_id"]
    assert any(record["level"] == "WARNING" for record in failed)
    for private in (question, answer, "sk-test-do-not-log", TEST_TOKEN.split(":")[1], key):
        assert private not in log
    assert '"chat_id"' not in log
