"""Real bot processes on a private Redis, for the durability suite.

Each is ``python -m bot <mode>`` forked from a parent that already imported the
bot (:mod:`bot.testing.warm_process`): what these tests claim happens after the
imports, which would otherwise cost each start seconds of CPU. Every process
starts in an empty directory with a clean environment (no developer ``.env``
leaks in), logs to a file of the test, and talks to the fake Bot API and the
scripted model server running in the test's process.

Leases are short here (:data:`LEASE_SECONDS`, 3 s instead of the production
15 s) so that a takeover after a crash costs the suite seconds, not minutes;
the claim interval follows the lease (a third of it).
"""

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import aiohttp
import pytest
import redis.asyncio as aioredis

from bot.queue.work_stream import GROUP
from bot.sessions.models import ConversationSession
from bot.storage.keys import RedisKeys, telegram_conversation
from bot.telegram.webhook import SECRET_HEADER
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, text_answer, user_texts
from bot.testing.pool_stop import unblock_reads
from bot.testing.redis_server import free_port
from bot.testing.settings import child_environment, stack_env
from bot.testing.telegram_server import TEST_TOKEN, FakeTelegramServer
from bot.testing.warm_process import WarmLauncher, WarmProcess

PREFIX = "dur"
STREAM = f"{PREFIX}:audit"
SECRET = "durability-secret"
HOOK_PATH = "/tg"
LEASE_SECONDS = 3.0
"""Short on purpose (production default: 15 s): a crash blocks a chat for about this long."""
CLAIM_INTERVAL_SECONDS = max(LEASE_SECONDS / 3, 0.5)
"""How often a worker looks for signals a dead consumer left (see bot.queue.worker)."""
START_WITHIN_SECONDS = 90.0
"""Only a guard against a hang: importing aiogram takes seconds on a loaded 2-core machine."""

Mode = Literal["polling", "webhook", "worker"]

_READY = {
    "polling": "starting (polling)",
    "webhook": "Webhook listening on",
    "worker": "Worker running",
}


@dataclass
class BotProcess:
    """One ``python -m bot <mode>`` child: its port (webhook), its process, its log file."""

    name: str
    mode: Mode
    port: int
    process: WarmProcess
    log_path: Path
    log_file: IO[bytes]

    @property
    def url(self) -> str:
        """Where a load balancer would post updates (webhook mode)."""
        return f"http://127.0.0.1:{self.port}{HOOK_PATH}"

    @property
    def alive(self) -> bool:
        """Whether the process has not exited."""
        return self.process.returncode is None

    def log(self) -> str:
        """What the process logged so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    async def sigkill(self) -> None:
        """Kill at once, as the OOM killer or a failing node would."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: the process (and its heartbeat) freezes, its sockets stay open."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        self.process.send_signal(signal.SIGCONT)

    async def terminate(self, within: float = 30.0) -> int:
        """SIGTERM, then the exit code (killed if it does not stop within ``within`` seconds)."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(within):
                return await self.process.wait()
        finally:
            await self.close()

    async def close(self) -> None:
        """The fixture's clean-up: continue, kill, close the log."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGCONT)
                self.process.kill()
            await self.process.wait()
        if not self.log_file.closed:
            self.log_file.close()


@dataclass
class Cluster:
    """Starts bot processes against one Redis, one fake Bot API and one scripted model."""

    tmp_path: Path
    telegram: FakeTelegramServer
    model: ScriptedOpenAIServer
    redis_url: str
    env: dict[str, str] = field(default_factory=dict)
    processes: list[BotProcess] = field(default_factory=list)
    launcher: WarmLauncher = field(default_factory=WarmLauncher)

    def environment(self, port: int, extra: Mapping[str, str]) -> dict[str, str]:
        """The child's whole environment."""
        env: dict[str, Any] = stack_env(self.telegram, self.model, self.redis_url, prefix=PREFIX)
        env.update(
            TELEGRAM_BOT_TOKEN=TEST_TOKEN,
            LLM_TIMEOUT_SECONDS=60,
            WEBHOOK_URL="https://bot.example.com",
            WEBHOOK_PATH=HOOK_PATH,
            WEBHOOK_SECRET=SECRET,
            WEBHOOK_HOST="127.0.0.1",
            WEBHOOK_PORT=port,
            # Polling and worker processes serve health and metrics: any free port each.
            HEALTH_PORT=0,
            SESSION_LEASE_SECONDS=LEASE_SECONDS,
            # Flood control has its own tests; these send messages back to back.
            FLOOD_BURST=100,
            # Large enough that no pair leaves the window: no summary request to the model.
            HISTORY_TOKEN_BUDGET=50000,
            TELEGRAM_SHUTDOWN_GRACE_SECONDS=10,
            LOG_LEVEL="INFO",
        )
        return child_environment(**{**env, **self.env, **extra})

    async def start(self, mode: Mode, name: str | None = None, **extra: str) -> BotProcess:
        """Start one process and wait until it takes work; fails with its log if it exits."""
        name = name or f"{mode}-{len(self.processes)}"
        port = free_port()
        workdir = self.tmp_path / name
        workdir.mkdir()
        log_path = self.tmp_path / f"{name}.log"
        log_file = log_path.open("wb")
        process = await self.launcher.start(
            [mode], cwd=workdir, env=self.environment(port, extra), log_path=log_path
        )
        child = BotProcess(name, mode, port, process, log_path, log_file)
        self.processes.append(child)
        deadline = time.monotonic() + START_WITHIN_SECONDS
        while _READY[mode] not in child.log():
            if not child.alive or time.monotonic() > deadline:
                pytest.fail(f"{name} ({mode}) did not start:\n{child.log()}")
            await asyncio.sleep(0.1)
        return child

    def logs(self) -> str:
        """Every process's log, named."""
        return "\n".join(f"--- {child.name}:\n{child.log()}" for child in self.processes)

    async def close(self) -> None:
        """Kill whatever still runs."""
        for child in self.processes:
            await child.close()

    async def finish(
        self,
        redis: aioredis.Redis,
        chat_ids: Iterable[int],
        *,
        turns: int,
        within: float = 60.0,
    ) -> None:
        """Wait until nothing is left to send and nobody is left to send it.

        First every chat's queue and outbox are empty, its lease is free, no work
        signal is pending and ``turns`` turns are audited: a reply sent twice (a
        re-run, an outbox entry sent again) can only come from one of those. Then
        every live process is stopped with SIGTERM (and must exit 0), so a send
        still on its way has arrived: what was sent can be counted, once and for all.
        """
        chats = list(chat_ids)
        started = time.monotonic()
        while not await _settled(redis, chats, turns):
            if time.monotonic() - started > within:
                pytest.fail(f"not settled within {within:.0f} s\n{self.logs()}")
            await asyncio.sleep(0.05)
        live = [child for child in self.processes if child.alive]
        stopping = asyncio.gather(*(child.terminate() for child in live))
        # A worker sees the stop when its blocking read returns: it returns now.
        while not stopping.done():
            await unblock_reads(redis)
            await asyncio.wait({stopping}, timeout=0.05)
        codes = await stopping
        assert codes == [0] * len(live), f"exit codes {codes}\n{self.logs()}"


def answer_for(question: str) -> str:
    """What :func:`echo` answers to ``question``."""
    return f"ответ: {question}"


def echo(body: Any) -> Reply:
    """Answers the newest user message: a reply names the question it belongs to."""
    texts = user_texts(body)
    return text_answer(answer_for(texts[-1] if texts else ""))


def asks(body: Any, question: str) -> bool:
    """Whether the request's newest user message is ``question``."""
    texts = user_texts(body)
    return bool(texts) and texts[-1] == question


async def post_update(
    http: aiohttp.ClientSession, target: BotProcess, update: dict[str, Any]
) -> int | None:
    """Post an update to a webhook process; its HTTP status, ``None`` if the post failed."""
    try:
        async with http.post(
            target.url,
            json=update,
            headers={SECRET_HEADER: SECRET},
            timeout=aiohttp.ClientTimeout(total=30),
        ) as response:
            await response.read()
            return response.status
    except (aiohttp.ClientError, TimeoutError):
        return None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def audit_turns(redis: aioredis.Redis) -> list[dict[str, str]]:
    """The ``type=turn`` entries of the audit stream, oldest first."""
    entries = await redis.xrange(STREAM) or []
    rows = [{_text(k): _text(v) for k, v in (fields or {}).items()} for _, fields in entries]
    return [row for row in rows if row.get("type") == "turn"]


async def _settled(redis: aioredis.Redis, chat_ids: list[int], turns: int) -> bool:
    keys = RedisKeys(PREFIX)
    pending = await redis.xpending(keys.work_stream, GROUP)
    if pending["pending"]:
        return False
    held = []
    for chat_id in chat_ids:
        chat = keys.conversation(telegram_conversation(chat_id))
        held += [chat.queue, chat.outbox, chat.lease]
    if await redis.exists(*held):
        return False
    return len(await audit_turns(redis)) >= turns


def session_key(chat_id: int) -> str:
    """The chat's session hash."""
    return f"{PREFIX}:{{tg:{chat_id}}}:session"


async def stored_session(redis: aioredis.Redis, chat_id: int) -> ConversationSession:
    """The chat's stored session."""
    raw = await redis.hget(session_key(chat_id), "d")
    assert raw, f"no session for chat {chat_id}"
    return ConversationSession.model_validate_json(raw)


async def wait_until(
    predicate: Callable[[], bool], within: float, what: str, logs: Callable[[], str]
) -> float:
    """Poll ``predicate`` until it holds; returns the seconds it took, fails after ``within``."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > within:
            pytest.fail(f"not within {within:.0f} s: {what}\n{logs()}")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


def without_adjacent_repeats(texts: list[str]) -> tuple[list[str], list[str]]:
    """``texts`` with a text that repeats the one before it dropped, and the dropped ones."""
    kept: list[str] = []
    repeats: list[str] = []
    for text in texts:
        if kept and kept[-1] == text:
            repeats.append(text)
        else:
            kept.append(text)
    return kept, repeats
