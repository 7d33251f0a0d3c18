"""The durability suite's forked bot processes behave as ``python -m bot`` children do."""

import signal
from pathlib import Path

import pytest

from bot.testing.settings import child_environment
from bot.testing.warm_process import WarmLauncher


async def test_a_child_runs_the_mode_with_only_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Set here, not in the child's environment: leaked, it would silence the key's error.
    monkeypatch.setenv("LLM_BACKEND", "offline")
    log = tmp_path / "bot.log"
    process = await WarmLauncher().start(
        ["polling"],
        cwd=tmp_path,
        env=child_environment(TELEGRAM_BOT_TOKEN="not-a-token"),
        log_path=log,
    )
    # Settings errors: exit 2, a line each, before any network.
    assert await process.wait() == 2
    lines = log.read_text(encoding="utf-8").strip().splitlines()
    assert all(line.startswith("configuration error: ") for line in lines), lines
    assert any("TELEGRAM_BOT_TOKEN is malformed" in line for line in lines)
    assert any("OPENAI_API_KEY is not set" in line for line in lines)


async def test_a_signal_ends_the_child_and_its_code_says_which(tmp_path: Path) -> None:
    process = await WarmLauncher().start(
        ["polling"],
        cwd=tmp_path,
        # Redis on a port nobody listens on: the preflight keeps retrying, the child lives.
        env=child_environment(REDIS_URL="redis://127.0.0.1:9/0"),
        log_path=tmp_path / "bot.log",
    )
    process.kill()
    assert await process.wait() == -signal.SIGKILL
    assert process.returncode == -signal.SIGKILL
