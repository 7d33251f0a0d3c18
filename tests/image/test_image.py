"""The image starts: its file set, reproduced from the ``Dockerfile``, runs ``python -m bot``.

Docker does not run here: :mod:`tests.image.dockerfile` follows the
``Dockerfile``'s lines in an empty directory, and the container's command runs
with ``python -S`` and only the image's files and the locked dependencies on
the path, so that the editable install of this checkout cannot hide a file the
image lacks.
"""

import asyncio
import fcntl
import json
import pickle
import signal
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import TEST_TOKEN, FakeTelegramServer
from tests.image.dockerfile import PROJECT, Image, reproduce_image

# Only a guard against a hang: importing aiogram takes seconds on a loaded machine.
START_WITHIN_SECONDS = 90.0


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Image:
    """The image's file set, built once per run: the first of the workers builds, the rest wait.

    Building runs pip (seconds of CPU); the tests only read the files it leaves.
    """
    if worker_id == "master":
        return reproduce_image(PROJECT, tmp_path_factory.mktemp("image"))
    # The directory of this run that every xdist worker's own temporary directory is in.
    shared = tmp_path_factory.getbasetemp().parent
    with (shared / "image.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = shared / "image.pickle"
        if not built.exists():
            workspace = shared / "image"
            workspace.mkdir()
            built.write_bytes(pickle.dumps(reproduce_image(PROJECT, workspace)))
        image: Image = pickle.loads(built.read_bytes())  # noqa: S301 - written just above, this run
    return image


def test_the_image_answers_help(image: Image) -> None:
    result = subprocess.run(
        image.python(*image.entrypoint[1:], "--help"),
        cwd=image.cwd,
        env=image.environment({}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "polling" in result.stdout


def test_the_image_holds_the_packages_and_data_but_not_the_test_doubles(image: Image) -> None:
    probe = (
        "import importlib.util as u, json, bot.settings as s;"
        "names = ('bot', 'turn', 'tools', 'prompts', 'bot.testing', 'tests', 'bench');"
        "found = {n: u.find_spec(n) is not None for n in names};"
        "print(json.dumps({**found, 'bot/tryout/demo_shop.json': s.DEMO_SHOP_DATA.is_file(),"
        " 'bot/tryout/help_center': s.DEMO_HELP_CENTER.is_dir()}))"
    )
    result = subprocess.run(
        image.python("-c", probe),
        cwd=image.cwd,
        env=image.environment({}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "bot": True,
        "turn": True,
        "tools": True,
        "prompts": True,
        "bot/tryout/demo_shop.json": True,
        "bot/tryout/help_center": True,
        "bot.testing": False,
        "tests": False,
        "bench": False,
    }


def test_every_data_file_of_the_packages_is_in_the_image(image: Image) -> None:
    """``package-data`` keeps up: each non-Python file of a shipped package is installed."""
    find = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]["packages"]["find"]
    tops = {pattern.rstrip("*").rstrip(".") for pattern in find["include"]}
    excluded = tuple(
        pattern.rstrip("*").rstrip(".").replace(".", "/") for pattern in find["exclude"]
    )
    data = {
        path.relative_to(image.context).as_posix()
        for top in tops
        for path in (image.context / top).rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"}
    }
    data = {name for name in data if not name.startswith(excluded)}
    assert "bot/tryout/demo_shop.json" in data
    missing = sorted(name for name in data if not (image.site_packages / name).is_file())
    assert missing == [], "add them to [tool.setuptools.package-data] in pyproject.toml"


async def test_the_image_polls_the_bot_api(
    image: Image, telegram: FakeTelegramServer, own_redis_server: RedisServer, tmp_path: Path
) -> None:
    log_path = tmp_path / "bot.log"
    env = image.environment(
        {
            "TELEGRAM_BOT_TOKEN": TEST_TOKEN,
            "TELEGRAM_API_BASE_URL": telegram.base_url,
            "LLM_BACKEND": "offline",
            "REDIS_URL": own_redis_server.url,
            "HEALTH_PORT": "0",
        }
    )
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *image.python(*image.entrypoint[1:], *image.cmd),
            cwd=image.cwd,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log,
        )
        try:
            deadline = time.monotonic() + START_WITHIN_SECONDS
            while telegram.received("getUpdates") == 0:
                if process.returncode is not None or time.monotonic() > deadline:
                    pytest.fail(f"the image did not start polling:\n{log_path.read_text()}")
                await asyncio.sleep(0.1)
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                assert await process.wait() == 0, log_path.read_text()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
