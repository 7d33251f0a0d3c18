"""Start-up failures are one line and exit 1, before aiogram and the model SDK are imported.

Real ``python -m bot`` child processes (``-X importtime`` lists what each imported)
against a closed port, and against the fake Bot API refusing the token or the
staff group; every mode. How long it takes is measured in ``bench/startup.py``,
not asserted here. The processes run in an empty directory (no ``.env``).
"""

import asyncio
import sys
from pathlib import Path

import pytest

from bot.telegram.preflight import NOT_A_FORUM
from bot.testing.redis_server import RedisServer, free_port
from bot.testing.settings import child_environment
from bot.testing.telegram_server import TEST_TOKEN, FakeTelegramServer

pytestmark = pytest.mark.timeout(120)

# What the imports must not reach: the reason they are deferred.
HEAVY = {"aiogram", "openai"}
WEBHOOK_ENV = {"WEBHOOK_URL": "https://bot.example", "WEBHOOK_SECRET": "s3cret-path"}
MODE_ENV: dict[str, dict[str, str]] = {
    "polling": {},
    "webhook": WEBHOOK_ENV,
    "worker": {},
    "console": {},
}
# A well-formed token the fake Bot API does not know: it answers 401.
WRONG_TOKEN = "987654321:AAH-a-token-the-server-does-not-know-0002"


async def run_bot_process(cwd: Path, mode: str, **env: str) -> tuple[int, list[str], set[str]]:
    """Exit code, the stderr lines that are not import times, and the top packages imported."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "bot",
        mode,
        cwd=cwd,
        env=child_environment(
            # The production backend: building it would import the SDK.
            LLM_BACKEND="openai",
            OPENAI_API_KEY="sk-preflight",
            OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1",
            REDIS_SOCKET_TIMEOUT_SECONDS="2",
            HEALTH_PORT="0",
            **MODE_ENV[mode],
            **env,
        ),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(90):
        _, stderr = await process.communicate()
    assert process.returncode is not None
    lines = stderr.decode().splitlines()
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in lines
        if line.startswith("import time:") and "self [us]" not in line
    }
    return process.returncode, [ln for ln in lines if not ln.startswith("import time:")], imported


@pytest.mark.parametrize("mode", ["polling", "webhook", "worker", "console"])
async def test_an_unreachable_redis_is_one_line_and_exit_1_before_the_heavy_imports(
    tmp_path: Path, mode: str
) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"

    code, lines, imported = await run_bot_process(
        tmp_path, mode, TELEGRAM_BOT_TOKEN=TEST_TOKEN, REDIS_URL=url
    )

    assert code == 1, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: Redis is unreachable at {url}: ConnectionError: ")
    assert not imported & HEAVY


@pytest.mark.parametrize("mode", ["polling", "webhook", "worker"])
async def test_a_rejected_token_is_one_line_and_exit_1_before_the_heavy_imports(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, mode: str
) -> None:
    code, lines, imported = await run_bot_process(
        tmp_path,
        mode,
        TELEGRAM_BOT_TOKEN=WRONG_TOKEN,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
    )

    assert code == 1, lines
    assert lines == ["error: the Bot API rejected TELEGRAM_BOT_TOKEN (unauthorized)"]
    assert WRONG_TOKEN.split(":")[1] not in "".join(lines)
    assert telegram.received("getMe") == 1
    assert not imported & HEAVY


async def test_a_refused_staff_group_is_one_line_and_exit_1_before_the_heavy_imports(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer
) -> None:
    # The group exists but Topics are off: handoff could never open a topic there.
    code, lines, imported = await run_bot_process(
        tmp_path,
        "polling",
        TELEGRAM_BOT_TOKEN=TEST_TOKEN,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        STAFF_CHAT_ID="-1001234567890",
    )

    assert code == 1, lines
    assert lines == [f"error: {NOT_A_FORUM}"]
    assert telegram.received("getChat") == 1
    assert telegram.calls_of("getUpdates") == []
    assert not imported & HEAVY
