"""``python -m bot`` as a real process: exit codes, start-up checks, SIGTERM drains; the webhook.

The processes run in an empty temporary directory, so that no developer's
``.env`` leaks in; everything they need comes from the environment given here.
"""

import asyncio
import logging
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bot.settings import RedisSettings
from bot.telegram.process import main, run_bot
from bot.telegram.startup_checks import Mode, settings_problems
from bot.telegram.webhook import SECRET_HEADER
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, text_answer
from bot.testing.polling_bot import PollingBot
from bot.testing.pool_stop import until_stopped
from bot.testing.redis_server import RedisServer, free_port
from bot.testing.settings import child_environment, make_settings, stack_env
from bot.testing.telegram_server import TEST_TOKEN, FakeTelegramServer
from bot.testing.warm_process import WarmLauncher


def child_env(**env: Any) -> dict[str, str]:
    """A child's environment: the offline model, INFO logs, any free health port, ``env``."""
    return child_environment(
        **{"LLM_BACKEND": "offline", "LOG_LEVEL": "INFO", "HEALTH_PORT": 0, **env}
    )


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No ``.env`` and none of the bot's variables: ``main()`` sees only what a test sets."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(("TELEGRAM_", "WEBHOOK_", "LLM_", "OPENAI_", "REDIS_", "FLOOD_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LLM_BACKEND", "offline")
    # Nothing listens here: had main() connected anywhere, the error would be another one.
    monkeypatch.setenv("TELEGRAM_API_BASE_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    monkeypatch.setenv("REDIS_SOCKET_TIMEOUT_SECONDS", "1")
    return monkeypatch


def test_missing_token_is_one_line_and_exit_2_before_any_connection(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main("polling") == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "configuration error: TELEGRAM_BOT_TOKEN is not set: put the token from @BotFather in .env"
    ]


def test_malformed_token_is_one_line_exit_2_and_not_echoed(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("TELEGRAM_BOT_TOKEN", "not a token s3cr3t")
    assert main("polling") == 2
    err = capsys.readouterr().err
    assert "TELEGRAM_BOT_TOKEN is malformed" in err
    assert "s3cr3t" not in err
    assert len(err.strip().splitlines()) == 1


def test_unreachable_redis_is_one_line_with_the_reason_and_exit_1(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("TELEGRAM_BOT_TOKEN", TEST_TOKEN)
    assert main("polling") == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    url = os.environ["REDIS_URL"]
    assert errors[0].startswith(f"error: Redis is unreachable at {url}: ConnectionError: ")
    assert "refused" in errors[0].lower()


def test_every_configuration_problem_is_one_line_at_once(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("REDIS_URL", "http://localhost:6379/0")
    assert main("webhook") == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "configuration error: REDIS_URL: must be a redis://, rediss:// or unix:// URL",
        "configuration error: TELEGRAM_BOT_TOKEN is not set: put the token from @BotFather in .env",
        "configuration error: WEBHOOK_URL is not set: the public HTTPS URL Telegram posts to",
        "configuration error: WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and - "
        "in webhook mode",
    ]


def _imported_modules(importtime_stderr: str) -> set[str]:
    """The modules ``python -X importtime`` reports as imported."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in importtime_stderr.splitlines()
        if line.startswith("import time:") and "self [us]" not in line
    }


def test_a_settings_error_is_reported_before_aiogram_or_the_sdk_is_imported(
    tmp_path: Path,
) -> None:
    """The real process: exit 2 with every problem, and neither aiogram nor openai imported."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bot", "polling"],
        cwd=tmp_path,
        env=child_env(REDIS_URL="http://localhost:6379/0"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if not line.startswith("import time:")]
    assert lines == [
        "configuration error: REDIS_URL: must be a redis://, rediss:// or unix:// URL",
        "configuration error: TELEGRAM_BOT_TOKEN is not set: put the token from @BotFather in .env",
    ]
    imported = {name.split(".")[0] for name in _imported_modules(result.stderr)}
    assert {"bot", "pydantic_settings"} <= imported
    assert not imported & {"aiogram", "openai", "aiohttp", "redis"}


def test_the_audit_cli_imports_neither_aiogram_nor_the_sdk(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bot", "audit", "--help"],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {name.split(".")[0] for name in _imported_modules(result.stderr)}
    assert "bot" in imported
    assert not imported & {"aiogram", "openai"}


def test_the_composition_root_console_and_eval_import_no_aiogram(tmp_path: Path) -> None:
    """Building the application without Telegram (the console, eval) never pays aiogram's import.

    Its models cost a process about four seconds to build: a feature that imported a
    button's ``CallbackData`` from its service doubled the console's start.
    """
    result = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            "import bot.app, bot.console, bot.evaluation.cli",
        ],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {name.split(".")[0] for name in _imported_modules(result.stderr)}
    assert "bot" in imported
    assert "aiogram" not in imported


def test_webhook_mode_needs_url_and_secret() -> None:
    problems = settings_problems(make_settings(REDIS_URL="redis://127.0.0.1:1/0"), "webhook")
    assert any("WEBHOOK_URL" in problem for problem in problems)
    assert any("WEBHOOK_SECRET" in problem for problem in problems)
    assert settings_problems(make_settings(REDIS_URL="redis://127.0.0.1:1/0"), "polling") == []


@pytest.mark.parametrize("mode", ["polling", "webhook", "worker"])
def test_telegram_modes_never_assume_a_redis(mode: Mode) -> None:
    """Without REDIS_URL a Telegram mode refuses to start; Sentinels need none of their own."""
    problems = settings_problems(make_settings(), mode)
    assert problems[0].startswith("REDIS_URL is not set: ")
    sentinel = make_settings(REDIS_MODE="sentinel", REDIS_SENTINELS="127.0.0.1:26379")
    assert not any("REDIS_URL" in problem for problem in settings_problems(sentinel, mode))


def test_telegram_modes_without_redis_url_exit_2_as_processes(tmp_path: Path) -> None:
    """The real process, with a token and the model set but no REDIS_URL: one line, exit 2.

    The console starts a private redis-server in that case; a production process never does.
    """
    result = subprocess.run(
        [sys.executable, "-m", "bot", "worker"],
        cwd=tmp_path,
        env=child_env(TELEGRAM_BOT_TOKEN=TEST_TOKEN),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        "configuration error: REDIS_URL is not set: the bot's Redis, e.g. "
        "redis://localhost:6379/0 (only the console and the audit CLI start a private one)"
    ]
    assert not (tmp_path / ".data").exists()


async def test_sigterm_lets_the_turn_in_flight_finish_then_exits_0(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, redis_client
) -> None:
    """The real process: a slow turn is in flight when SIGTERM arrives; the reply still comes."""
    model_called = asyncio.Event()
    release = asyncio.Event()

    async def slow(body: dict[str, Any]) -> Reply:
        model_called.set()
        await release.wait()
        return text_answer("Ответ после паузы.")

    async with ScriptedOpenAIServer() as model:
        model.responder = slow
        # Forked after the imports (bot.testing.warm_process): the claim is about the stop.
        log_path = tmp_path / "bot.log"
        process = await WarmLauncher().start(
            [],
            cwd=tmp_path,
            env=child_env(
                TELEGRAM_BOT_TOKEN=TEST_TOKEN,
                **stack_env(telegram, model, redis_server.url, prefix="proc"),
            ),
            log_path=log_path,
        )
        try:
            await telegram.wait_for(lambda: telegram.received("getUpdates") > 0, within=60)
            await telegram.push_message(30, "Медленный вопрос")
            async with asyncio.timeout(10):
                await model_called.wait()
            process.send_signal(signal.SIGTERM)
            # Give the signal time to land before the model answers (not a timing assertion:
            # the reply must come either way; this only makes the drain path the likely one).
            await asyncio.sleep(0.3)
            release.set()
            assert await telegram.wait_for_texts(30, 1) == ["Ответ после паузы."]
            exiting = asyncio.ensure_future(process.wait())
            async with asyncio.timeout(20):
                # The process exits once its worker's blocking read returns: it returns now.
                await until_stopped(exiting, RedisSettings(REDIS_URL=redis_server.url))
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    log = log_path.read_text(encoding="utf-8")
    assert process.returncode == 0, log
    assert "Bot @support_test_bot starting (polling)" in log
    assert TEST_TOKEN.split(":")[1] not in log


@pytest.fixture
async def slow_model() -> AsyncIterator[tuple[ScriptedOpenAIServer, asyncio.Event]]:
    release = asyncio.Event()

    async def gated(body: dict[str, Any]) -> Reply:
        await release.wait()
        return text_answer("Ответ через вебхук.")

    async with ScriptedOpenAIServer() as model:
        model.responder = gated
        yield model, release


async def test_webhook_answers_telegram_at_once_and_replies_in_the_background(
    telegram: FakeTelegramServer,
    slow_model: tuple[ScriptedOpenAIServer, asyncio.Event],
    redis_server: RedisServer,
    redis_client,
) -> None:
    model, release = slow_model
    port = free_port()
    settings = make_settings(
        **stack_env(telegram, model, redis_server.url, prefix="hook"),
        WEBHOOK_URL="https://bot.example.com/",
        WEBHOOK_PATH="/tg",
        WEBHOOK_SECRET="s3cret-token",
        WEBHOOK_HOST="127.0.0.1",
        WEBHOOK_PORT=port,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_bot(settings, "webhook", stop))
    try:
        await telegram.wait_for(lambda: bool(telegram.calls_of("setWebhook")) or task.done())
        assert telegram.webhook["url"] == "https://bot.example.com/tg"
        assert telegram.webhook["secret_token"] == "s3cret-token"
        url = f"http://127.0.0.1:{port}/tg"
        update = telegram.message_update(40, "Вопрос через вебхук")
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json=update, headers={SECRET_HEADER: "wrong"}) as response:
                assert response.status == 401
            async with http.post(
                url, json=update, headers={SECRET_HEADER: "s3cret-token"}
            ) as response:
                # Answered while the model has not answered yet.
                assert response.status == 200
                assert telegram.sent_texts(40) == []
        release.set()
        assert await telegram.wait_for_texts(40, 1) == ["Ответ через вебхук."]
        assert len(model.requests) == 1  # the wrong secret never reached the model
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{port}/healthz") as response,
        ):
            assert response.status == 200
            health = await response.json()
        assert health["redis"] is True
        assert health["lost_audit_entries"] == 0
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            assert response.status == 200
            metrics = await response.text()
        assert 'support_turns_total{outcome="answered"} 1.0' in metrics.splitlines()
    finally:
        stop.set()
        async with asyncio.timeout(20):
            assert await until_stopped(task, settings.redis) == 0


@pytest.fixture
async def not_a_bot_api() -> AsyncIterator[str]:
    """A web server that answers every request with an HTML page, as a wrong URL would."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(
            text="<html><body>Welcome to nginx!</body></html>", content_type="text/html"
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", page)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def _start_up_error(
    api_base_url: str, redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=api_base_url, REDIS_URL=redis_server.url, REDIS_KEY_PREFIX="boot"
    )
    async with asyncio.timeout(30):
        assert await run_bot(settings, "polling", asyncio.Event()) == 1
    return capsys.readouterr().err.strip().splitlines()


async def test_an_api_base_url_that_is_not_a_bot_api_server_is_one_line(
    not_a_bot_api: str, redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    err = await _start_up_error(not_a_bot_api, redis_server, capsys)
    assert len(err) == 1
    assert err[0].startswith(
        f"error: TELEGRAM_API_BASE_URL {not_a_bot_api} is not a Bot API server: "
        "its answer to getMe was not Bot API JSON ("
    )
    assert TEST_TOKEN not in err[0]


async def test_a_refused_bot_api_connection_is_one_line_with_the_reason(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    err = await _start_up_error(url, redis_server, capsys)
    assert len(err) == 1
    assert err[0].startswith(f"error: cannot reach the Bot API at {url}: ClientConnectorError")
    assert "Connect call failed" in err[0] or "Cannot connect" in err[0]
    assert TEST_TOKEN not in err[0]


async def test_a_poller_and_a_worker_on_one_host_both_serve_health_with_the_defaults(
    telegram: FakeTelegramServer, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """HEALTH_PORT unset: the second process takes the next free port and logs it."""
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="healthports",
    )
    assert "port" not in settings.health.model_fields_set
    caplog.set_level(logging.INFO, logger="bot.telegram.process")
    poller = PollingBot(settings, telegram)
    await poller.start(within=60)
    stop = asyncio.Event()
    worker = asyncio.create_task(run_bot(settings, "worker", stop))
    try:
        # Polled: the fake Bot API's wait_for looks again only after its next call.
        async with asyncio.timeout(60):
            while True:
                if "Worker running" in caplog.text or worker.done():
                    break
                await asyncio.sleep(0.02)
        assert not worker.done(), caplog.text
        announced = r"Health and metrics on http://127\.0\.0\.1:(\d+)/"
        ports = [int(match) for match in re.findall(announced, caplog.text)]
        assert len(ports) == 2
        assert ports[0] != ports[1]
        async with aiohttp.ClientSession() as session:
            for port in ports:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                    assert response.status == 200
    finally:
        stop.set()
        async with asyncio.timeout(30):
            assert await until_stopped(worker, settings.redis) == 0
        assert await poller.stop() == 0


async def test_an_explicit_health_port_that_is_taken_is_one_line_and_exit_1(
    telegram: FakeTelegramServer, redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = make_settings(
            TELEGRAM_API_BASE_URL=telegram.base_url,
            REDIS_URL=redis_server.url,
            REDIS_KEY_PREFIX="healthports",
            HEALTH_PORT=port,
        )
        async with asyncio.timeout(60):
            assert await run_bot(settings, "worker", asyncio.Event()) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: cannot listen on HEALTH_HOST:HEALTH_PORT 127.0.0.1:{port}: Address already in use"
    ]


async def _webhook_start_up_error(
    telegram: FakeTelegramServer,
    redis_server: RedisServer,
    capsys: pytest.CaptureFixture[str],
    **env: Any,
) -> list[str]:
    """``run_bot`` in webhook mode must return 1 after exactly one ``error:`` line."""
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="hookstart",
        WEBHOOK_PATH="/tg",
        WEBHOOK_SECRET="s3cret-token",
        **{"WEBHOOK_URL": "https://bot.example.com", "WEBHOOK_HOST": "127.0.0.1", **env},
    )
    async with asyncio.timeout(60):
        assert await run_bot(settings, "webhook", asyncio.Event()) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert TEST_TOKEN not in err
    return [line for line in err.splitlines() if line.startswith("error:")]


async def test_an_unresolvable_webhook_host_is_one_line_and_exit_1(
    telegram: FakeTelegramServer, redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    errors = await _webhook_start_up_error(
        telegram, redis_server, capsys, WEBHOOK_HOST="no-such-host.invalid", WEBHOOK_PORT=port
    )
    assert len(errors) == 1
    assert errors[0].startswith(
        f"error: cannot listen on WEBHOOK_HOST:WEBHOOK_PORT no-such-host.invalid:{port}: "
    )
    assert telegram.calls_of("setWebhook") == []


async def test_a_busy_webhook_port_is_one_line_and_exit_1(
    telegram: FakeTelegramServer, redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        errors = await _webhook_start_up_error(telegram, redis_server, capsys, WEBHOOK_PORT=port)
    assert errors == [
        f"error: cannot listen on WEBHOOK_HOST:WEBHOOK_PORT 127.0.0.1:{port}: "
        "Address already in use"
    ]
    assert telegram.calls_of("setWebhook") == []


async def test_a_webhook_url_the_bot_api_refuses_is_one_line_and_exit_1(
    telegram: FakeTelegramServer, redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    errors = await _webhook_start_up_error(
        telegram, redis_server, capsys, WEBHOOK_URL="http://bot.example.com", WEBHOOK_PORT=port
    )
    assert errors == [
        "error: the Bot API refused setWebhook for http://bot.example.com/tg: "
        "TelegramBadRequest: Bad Request: bad webhook: An HTTPS URL must be provided for webhook"
    ]
    # Nothing listens any more: the process is done.
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


async def test_a_first_burst_finds_the_process_ready_when_it_says_so(
    telegram: FakeTelegramServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    """The start-up line comes after the start-up collection, and turns ask no ``getMe``.

    Each turn reads the bot's name (``bot.me()``); unless asked once before work is
    taken, a first burst's turns each called ``getMe`` until one answer was kept.
    """
    async with ScriptedOpenAIServer() as model:
        model.responder = lambda body: text_answer("Ответ.")
        log_path = tmp_path / "bot.log"
        process = await WarmLauncher().start(
            ["polling"],
            cwd=tmp_path,
            env=child_env(
                TELEGRAM_BOT_TOKEN=TEST_TOKEN,
                **stack_env(telegram, model, redis_server.url, prefix="ready"),
            ),
            log_path=log_path,
        )
        try:
            async with asyncio.timeout(120):
                while not log_path.exists() or "starting (polling)" not in log_path.read_text(
                    encoding="utf-8"
                ):
                    assert process.returncode is None
                    await asyncio.sleep(0.05)
            asked_at_start = telegram.received("getMe")
            chats = range(40_001, 40_011)
            await telegram.push(*(telegram.message_update(chat, "Вопрос") for chat in chats))
            for chat in chats:
                assert await telegram.wait_for_texts(chat, 1, within=60) == ["Ответ."]
            assert telegram.received("getMe") == asked_at_start
        finally:
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                await process.wait()
    log = log_path.read_text(encoding="utf-8")
    assert log.index("Start-up objects set aside") < log.index("starting (polling)"), log
