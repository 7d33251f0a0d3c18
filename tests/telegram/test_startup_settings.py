"""Settings found wrong only at start-up are still one line and exit 2, before any network.

Real ``python -m bot`` processes in an empty directory (no ``.env``), with a live
Redis and the fake Bot API: had a check come after the network checks, the
process would have talked to both (and failed later, with exit 1). That the fake
Bot API saw no request is what shows the line came first; how long it took is
not asserted here.
"""

import asyncio
import json
import socket
import sys
from pathlib import Path

import pytest

from bot.testing.redis_server import RedisServer
from bot.testing.settings import child_environment
from bot.testing.telegram_server import TEST_TOKEN, FakeTelegramServer

pytestmark = pytest.mark.timeout(120)

SECRET = "Bearer shop-secret-value-0042"


async def run_bot(cwd: Path, mode: str, **env: str) -> tuple[int, list[str]]:
    """Exit code and stderr lines of ``python -m bot <mode>`` with ``env``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        mode,
        cwd=cwd,
        env=child_environment(LLM_BACKEND="offline", LOG_LEVEL="INFO", **env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(90):
        _, stderr = await process.communicate()
    assert process.returncode is not None
    return process.returncode, stderr.decode().splitlines()


def reachable(telegram: FakeTelegramServer, redis_server: RedisServer) -> dict[str, str]:
    """A token, the fake Bot API and a live Redis: everything a start needs but the fault."""
    return {
        "TELEGRAM_BOT_TOKEN": TEST_TOKEN,
        "TELEGRAM_API_BASE_URL": telegram.base_url,
        "REDIS_URL": redis_server.url,
        "HEALTH_PORT": "0",
    }


def shop(**fields: object) -> str:
    """``MCP_SERVERS`` with one server (nothing listens at its URL: it is never reached)."""
    return json.dumps([{"name": "shop", "url": "http://127.0.0.1:9/mcp", **fields}])


def assert_one_line_before_the_network(
    code: int, lines: list[str], telegram: FakeTelegramServer, *names: str
) -> None:
    assert code == 2, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith("configuration error: "), lines
    for name in names:
        assert name in lines[0], lines
    assert telegram.calls_of("getMe") == []


async def test_mcp_servers_that_is_not_json_is_one_line_naming_it(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer
) -> None:
    # One trailing comma: pydantic-settings used to print a 50-line traceback, exit 1.
    broken = '[{"name": "shop", "url": "https://shop.example/mcp"},]'

    code, lines = await run_bot(
        tmp_path, "polling", **reachable(telegram, redis_server), MCP_SERVERS=broken
    )

    assert_one_line_before_the_network(code, lines, telegram, "MCP_SERVERS", "JSON")


async def test_mcp_servers_in_dotenv_that_is_not_json_is_one_line_naming_it(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer
) -> None:
    (tmp_path / ".env").write_text(
        'MCP_SERVERS=[{"name": "shop", "url": "https://shop.example/mcp"},]\n', encoding="utf-8"
    )

    code, lines = await run_bot(tmp_path, "worker", **reachable(telegram, redis_server))

    assert_one_line_before_the_network(code, lines, telegram, "MCP_SERVERS", "JSON")


async def test_an_unset_header_variable_is_one_line_before_the_network(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer
) -> None:
    servers = shop(headers_from_env={"Authorization": "SHOP_MCP_AUTH"})

    code, lines = await run_bot(
        tmp_path, "polling", **reachable(telegram, redis_server), MCP_SERVERS=servers
    )

    assert_one_line_before_the_network(
        code, lines, telegram, "MCP_SERVERS", "shop", "Authorization", "SHOP_MCP_AUTH"
    )


@pytest.mark.parametrize("value", [f"{SECRET}\n", f"{SECRET} ", f"{SECRET}\r\n", f" {SECRET}"])
async def test_a_header_value_with_a_stray_blank_names_the_variable_never_the_value(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, value: str
) -> None:
    """A secret mounted from a file ends with a newline; h11 used to print it whole."""
    servers = shop(headers_from_env={"Authorization": "SHOP_MCP_AUTH"})

    code, lines = await run_bot(
        tmp_path,
        "polling",
        **reachable(telegram, redis_server),
        MCP_SERVERS=servers,
        SHOP_MCP_AUTH=value,
    )

    assert_one_line_before_the_network(code, lines, telegram, "SHOP_MCP_AUTH", "Authorization")
    assert "shop-secret" not in "\n".join(lines)


async def test_a_language_without_a_catalog_is_one_line_before_the_network(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer
) -> None:
    code, lines = await run_bot(
        tmp_path, "polling", **reachable(telegram, redis_server), LANGUAGES="ru,de"
    )

    assert_one_line_before_the_network(code, lines, telegram, "LANGUAGES", "de")
    assert lines[0].count("LANGUAGES") == 1, lines


@pytest.mark.parametrize("mode", ["polling", "worker"])
async def test_a_busy_health_port_is_one_line_before_the_network(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, mode: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        code, lines = await run_bot(
            tmp_path, mode, **{**reachable(telegram, redis_server), "HEALTH_PORT": str(port)}
        )

    assert_one_line_before_the_network(code, lines, telegram, "HEALTH_PORT", str(port))
    assert telegram.calls_of("setMyCommands") == []


async def test_a_busy_webhook_port_is_one_line_before_the_network(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        code, lines = await run_bot(
            tmp_path,
            "webhook",
            **reachable(telegram, redis_server),
            WEBHOOK_URL="https://bot.example",
            WEBHOOK_SECRET="s3cret-path",
            WEBHOOK_HOST="127.0.0.1",
            WEBHOOK_PORT=str(port),
        )

    assert_one_line_before_the_network(code, lines, telegram, "WEBHOOK_PORT", str(port))
