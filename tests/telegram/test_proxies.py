"""Telegram and the model API through a real HTTP CONNECT proxy on loopback.

The bot runs against the fake Bot API and the scripted OpenAI server; every
connection must go through the proxy, which records the tunnels it opened.
"""

import pytest
from aiogram.exceptions import TelegramNetworkError

from bot.llm.errors import LLMUnavailableError
from bot.llm.openai_client import OpenAIChatClient
from bot.ops.startup import StartupError
from bot.telegram.preflight import check_bot_api
from bot.telegram.process import create_bot
from bot.testing.openai_server import ScriptedOpenAIServer, text_answer
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings, stack_settings
from bot.testing.telegram_server import FakeTelegramServer
from tests.support.http_proxy import ConnectProxy, Socks5Proxy


def host_port(base_url: str) -> str:
    return base_url.split("://", 1)[1].split("/", 1)[0]


async def test_telegram_and_the_model_through_proxies_with_credentials(
    telegram: FakeTelegramServer, redis_server: RedisServer, redis_client
) -> None:
    async with (
        ConnectProxy(user="bot", password="pa:ss") as telegram_proxy,
        ConnectProxy(user="llm", password="s3cret") as model_proxy,
        ScriptedOpenAIServer() as model,
    ):
        model.script(text_answer("Ответ через прокси."))
        settings = stack_settings(
            telegram,
            model,
            redis_server.url,
            prefix="proxy",
            TELEGRAM_PROXY=telegram_proxy.url.replace("pa:ss", "pa%3Ass"),
            LLM_PROXY=model_proxy.url,
        )
        bot = PollingBot(settings, telegram)
        await bot.start()
        try:
            await telegram.push_message(50, "Вопрос через прокси")
            assert await telegram.wait_for_texts(50, 1) == ["Ответ через прокси."]
        finally:
            assert await bot.stop() == 0
    assert host_port(telegram.base_url) in telegram_proxy.tunnels
    assert set(telegram_proxy.tunnels) == {host_port(telegram.base_url)}
    assert set(model_proxy.tunnels) == {host_port(model.base_url)}
    assert telegram_proxy.refused == model_proxy.refused == 0


async def test_both_through_one_socks5_proxy(
    telegram: FakeTelegramServer, redis_server: RedisServer, redis_client
) -> None:
    async with Socks5Proxy(user="bot", password="s0cks") as proxy, ScriptedOpenAIServer() as model:
        model.script(text_answer("Ответ через SOCKS."))
        settings = stack_settings(
            telegram,
            model,
            redis_server.url,
            prefix="socks",
            TELEGRAM_PROXY=proxy.url,
            LLM_PROXY=proxy.url,
        )
        bot = PollingBot(settings, telegram)
        await bot.start()
        try:
            await telegram.push_message(52, "Вопрос")
            assert await telegram.wait_for_texts(52, 1) == ["Ответ через SOCKS."]
        finally:
            assert await bot.stop() == 0
    assert set(proxy.tunnels) == {host_port(telegram.base_url), host_port(model.base_url)}


async def test_the_standard_variables_apply_when_no_proxy_is_configured(
    telegram: FakeTelegramServer,
    redis_server: RedisServer,
    redis_client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with ConnectProxy() as proxy, ScriptedOpenAIServer() as model:
        model.script(text_answer("Ответ через HTTP_PROXY."))
        # Both test servers are http://127.0.0.1:<port>: HTTP_PROXY is the variable for them.
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("http_proxy", raising=False)
        bot = PollingBot(stack_settings(telegram, model, redis_server.url, prefix="envp"), telegram)
        await bot.start()
        try:
            await telegram.push_message(51, "Вопрос")
            assert await telegram.wait_for_texts(51, 1) == ["Ответ через HTTP_PROXY."]
        finally:
            assert await bot.stop() == 0
    assert set(proxy.tunnels) == {host_port(telegram.base_url), host_port(model.base_url)}


async def test_a_proxy_that_refuses_the_credentials_stops_start_up(
    telegram: FakeTelegramServer, redis_server: RedisServer, redis_client
) -> None:
    async with ConnectProxy(user="bot", password="right") as proxy:
        wrong = proxy.url.replace("right", "wrong")
        settings = make_settings(
            TELEGRAM_API_BASE_URL=telegram.base_url,
            TELEGRAM_PROXY=wrong,
            REDIS_URL=redis_server.url,
            REDIS_KEY_PREFIX="proxyfail",
        )
        # The start-up check (before aiogram is imported) and the bot's own session alike.
        with pytest.raises(StartupError) as raised:
            await check_bot_api(settings, environ={})
        bot = create_bot(settings, environ={})
        try:
            with pytest.raises(TelegramNetworkError, match="407"):
                await bot.get_me()
        finally:
            await bot.session.close()
    line = str(raised.value)
    assert line.startswith(f"cannot reach the Bot API at {telegram.base_url}: ProxyError")
    assert "407" in line
    assert "wrong" not in line
    assert proxy.refused >= 2
    assert proxy.tunnels == []
    assert telegram.received("getMe") == 0


def test_a_bad_proxy_variable_is_a_start_up_error_that_names_it_not_its_value() -> None:
    settings = make_settings(TELEGRAM_API_BASE_URL="https://api.telegram.org")
    with pytest.raises(StartupError) as raised:
        create_bot(settings, environ={"HTTPS_PROXY": "ftp://user:hunter2@proxy"})
    assert "HTTPS_PROXY" in str(raised.value)
    assert "hunter2" not in str(raised.value)


async def test_a_model_proxy_that_refuses_is_the_model_unavailable() -> None:
    async with ConnectProxy(user="llm", password="right") as proxy, ScriptedOpenAIServer() as model:
        model.script(text_answer("never sent"))
        client = OpenAIChatClient.create(
            api_key="sk-test",
            base_url=model.base_url,
            model="scripted-model",
            timeout_seconds=5,
            max_retries=0,
            proxy=proxy.url.replace("right", "wrong"),
        )
        try:
            with pytest.raises(LLMUnavailableError, match="proxy"):
                await client.generate_with_tools([{"role": "user", "content": "?"}], [])
        finally:
            await client.close()
    assert proxy.refused == 1
    assert model.requests == []
