"""Helpers of the eval's tests: scenario files written on the fly, settings without ``.env``."""

from pathlib import Path

import pytest

from bot.settings import Settings
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "evals"


@pytest.fixture
def eval_settings(redis_server: RedisServer) -> Settings:
    """The try-out configuration (the offline demo model) on the suite's Redis."""
    return make_settings(REDIS_URL=redis_server.url)


@pytest.fixture
def write_scenario(tmp_path: Path):
    """Write a scenario file (YAML text) under ``tmp_path``; returns its path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / "scenarios" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return write
