"""The real parts a benchmark runs against: redis-server, a scripted model, the engine.

Everything talks over real sockets. The engine is built by the production
composition root (:func:`bot.app.build_application`); the benchmark only swaps the
Redis connection class for one that counts round trips and commands.
"""

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Self

import redis.asyncio as aioredis
from aiohttp import web
from redis._parsers import _AsyncRESP2Parser
from redis.asyncio.connection import Connection, DefaultParser

from bench.model_script import bench_responder
from bot.app import Application, build_application
from bot.llm.types import ToolCallingClient
from bot.settings import (
    RedisSettings,
    Settings,
)
from bot.storage.connection import async_client, every_master
from bot.testing.openai_server import ScriptedOpenAIServer
from bot.testing.redis_server import RedisServer

KEY_PREFIX = "bench"
AUDIT_STREAM = "bench:audit"
BOT_TOKEN = "123456:bench-token-bench-token-bench-token"  # noqa: S105 - fake, for the fake API


@dataclass
class RedisCounters:
    """Round trips (socket writes) and top-level commands sent by the engine's client."""

    round_trips: int = 0
    commands: int = 0


REDIS_PARSER_VARIABLE = "BENCH_REDIS_PARSER"
"""``python`` forces redis-py's pure-Python reply parser; otherwise its default is used."""


def redis_parser(kind: str | None = None) -> type[Any]:
    """The reply parser class: ``python`` (pure Python), else redis-py's default
    (hiredis when installed); ``None`` reads :data:`REDIS_PARSER_VARIABLE`."""
    if (kind or os.environ.get(REDIS_PARSER_VARIABLE)) == "python":
        return _AsyncRESP2Parser
    return DefaultParser


def redis_parser_name(kind: str | None = None) -> str:
    """``hiredis`` or ``python``."""
    return "hiredis" if "Hiredis" in redis_parser(kind).__name__ else "python"


class CountingConnection(Connection):
    """A redis-py connection that counts what it sends (a pipeline is one round trip)."""

    def __init__(self, *, counters: RedisCounters, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._counters = counters

    def pack_command(self, *args: Any) -> list[bytes]:
        self._counters.commands += 1
        return super().pack_command(*args)

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        self._counters.round_trips += 1
        await super().send_packed_command(command, check_health)


class TimedOpenAIServer(ScriptedOpenAIServer):
    """The scripted server, adding up the time it spends on each request.

    That time (reading the body, scripting, the configured latency, encoding the
    answer) is the *model's* time; everything else in a turn is the bot's.
    """

    def __init__(self) -> None:
        super().__init__()
        self.model_seconds = 0.0
        self.responder = bench_responder

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = perf_counter()
        try:
            return await super()._handle(request)
        finally:
            self.model_seconds += perf_counter() - started


class ChildServer:
    """A benchmark server as a child process (its own core, its own memory).

    The child prints one URL per line once it listens (``urls`` of them); the
    first is :attr:`base_url`, a second one, if any, is its control URL.
    """

    def __init__(self, module: str, *args: str, urls: int = 1) -> None:
        self._command = [sys.executable, "-m", module, *args]
        self._urls = urls
        self._process: subprocess.Popen[str] | None = None
        self.base_url = ""
        self.control_url = ""

    def __enter__(self) -> Self:
        self._process = subprocess.Popen(self._command, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None  # noqa: S101 - stdout=PIPE above
        lines = [self._process.stdout.readline().strip() for _ in range(self._urls)]
        if not all(line.startswith("http://") for line in lines):
            self.__exit__()
            raise RuntimeError(f"{self._command[2]} did not start")
        self.base_url = lines[0]
        self.control_url = lines[1] if len(lines) > 1 else ""
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            if self._process.stdout is not None:
                self._process.stdout.close()
            self._process = None

    def cpu_seconds(self) -> float:
        """User plus system CPU time the child has used so far."""
        if self._process is None:
            return 0.0
        return process_cpu_seconds(self._process.pid)


class ModelServerProcess(ChildServer):
    """``python -m bench.model_server``: the scripted model with ``latency_seconds`` per request.

    Its control URL serves ``GET /timings``: when each request was handled
    (``time.monotonic()`` of the child, the same clock as every process here).
    """

    def __init__(self, latency_seconds: float) -> None:
        super().__init__("bench.model_server", "--latency", str(latency_seconds), urls=2)


def bench_settings(
    redis_url: str, model_base_url: str, *, history_token_budget: int = 2000
) -> Settings:
    """Production defaults, pointed at the benchmark's Redis and model server (no ``.env``)."""
    return Settings.from_env(
        {
            "TELEGRAM_BOT_TOKEN": BOT_TOKEN,
            "LLM_BACKEND": "openai",
            "OPENAI_API_KEY": "sk-bench",
            "OPENAI_BASE_URL": model_base_url,
            "LLM_MODEL": "bench-model",
            "LLM_MAX_RETRIES": 0,
            "REDIS_URL": redis_url,
            "REDIS_KEY_PREFIX": KEY_PREFIX,
            "HISTORY_TOKEN_BUDGET": history_token_budget,
            "AUDIT_STREAM": AUDIT_STREAM,
            "LOG_LEVEL": "WARNING",
        },
        env_file=None,
    )


async def open_engine(
    settings: Settings, *, parser: str | None = None, llm: ToolCallingClient | None = None
) -> tuple[Application, RedisCounters]:
    """The production application, its Redis client counting round trips and commands.

    ``parser`` picks redis-py's reply parser (see :func:`redis_parser`); ``llm``
    replaces the model client the settings describe.
    """
    app = await build_application(settings, llm=llm)
    counters = RedisCounters()
    if not isinstance(app.redis, aioredis.Redis):
        raise TypeError("round trips are counted on a standalone or Sentinel client only")
    pool = app.redis.connection_pool
    pool.connection_class = CountingConnection
    pool.connection_kwargs["counters"] = counters
    pool.connection_kwargs["parser_class"] = redis_parser(parser)
    # Drop the connection made for the start-up PING; new ones are counting ones.
    await pool.disconnect()
    pool.reset()
    return app, counters


class RedisStats:
    """Server-side command counts (``INFO commandstats``) over a measured window."""

    def __init__(self, url: str, settings: RedisSettings | None = None) -> None:
        # The same factory as the bot: on a cluster, statistics are summed over every master.
        self._client = async_client(settings or RedisSettings(REDIS_URL=url), max_connections=4)

    async def reset(self) -> None:
        """Zero the counters (``CONFIG RESETSTAT`` on every master)."""
        for where in await every_master(self._client):
            await self._client.config_resetstat(**where)

    async def commands(self) -> dict[str, int]:
        """Calls per command since the reset, the statistics' own calls excluded.

        Commands run inside Lua scripts are counted too (Redis counts them).
        """
        calls: dict[str, int] = {}
        masters = await every_master(self._client)
        for where in masters:
            info: dict[str, Any] = await self._client.info("commandstats", **where)
            for name, stats in info.items():
                if name.startswith("cmdstat_"):
                    command = name.removeprefix("cmdstat_")
                    calls[command] = calls.get(command, 0) + int(stats["calls"])
        if "info" in calls:
            calls["info"] -= len(masters)
        calls.pop("config|resetstat", None)
        return {name: count for name, count in calls.items() if count}

    async def memory_usage(self, key: str) -> int:
        """Bytes Redis spends on ``key`` (all samples)."""
        used = await self._client.memory_usage(key, samples=0)
        return int(used or 0)

    async def flush(self) -> None:
        """Empty the database (every master)."""
        for where in await every_master(self._client):
            await self._client.flushdb(**where)

    async def aclose(self) -> None:
        """Close the statistics client."""
        await self._client.aclose()

    async def flush_and_close(self) -> None:
        """Empty the database and close."""
        await self.flush()
        await self.aclose()


class BenchRedis:
    """A private redis-server for one benchmark run."""

    def __init__(self) -> None:
        self.server = RedisServer()

    def __enter__(self) -> "BenchRedis":
        self.server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.close()

    @property
    def url(self) -> str:
        """``redis://`` URL of the server."""
        return self.server.url


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (from ``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        # The command name may contain spaces; the fields after it are fixed.
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes() -> int:
    """Resident set size of this process now."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def peak_rss_bytes(pid: int) -> int:
    """The most memory process ``pid`` has held resident since it started (``VmHWM``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


async def settle() -> None:
    """Let callbacks scheduled by the last turn run before the next measurement."""
    await asyncio.sleep(0)
