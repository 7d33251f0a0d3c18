"""``python -m bot <mode>`` processes forked from a parent that has already imported the bot.

Importing aiogram (its Bot API models), the openai SDK and the MCP SDK costs a
bot process about 5 s of CPU on a quiet 2-core machine and 10 s or more under
the suite's load, while what the process tests claim (a crash, a restart,
several replicas, a stop) happens after the imports. Each child here is a real
OS process running :func:`bot.__main__.main` with its own environment, working
directory and log file, killed and stopped with real signals; what it skips is
re-running imports a fork server ran once (multiprocessing's ``forkserver``
start method with those modules preloaded, one server per test process).

Tests whose claim is the start itself (the one-line start-up failures, the
imports a mode pays, a hang-up during start) run ``python -m bot`` instead.
"""

import asyncio
import contextlib
import multiprocessing
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path

PRELOAD = (
    "bot.__main__",
    "bot.telegram.preflight",
    "bot.telegram.process",
)
"""What ``python -m bot polling|webhook|worker`` imports before it takes work."""


def _run_bot(argv: list[str], cwd: str, env: dict[str, str], log_path: str) -> None:
    """The child's body: become ``python -m bot <argv>`` in ``cwd``, logging to ``log_path``."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_WRONLY)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(null, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    sys.argv = ["python -m bot", *argv]
    from bot.__main__ import main  # noqa: PLC0415 - preloaded by the fork server

    raise SystemExit(main(argv))


def _settle(exited: "asyncio.Future[None]") -> None:
    if not exited.done():
        exited.set_result(None)


@dataclass
class WarmProcess:
    """One forked bot process: the subset of ``asyncio.subprocess.Process`` the tests use."""

    process: BaseProcess
    _code: int | None = field(default=None, init=False)

    @property
    def pid(self) -> int:
        """The child's process id."""
        pid = self.process.pid
        assert pid is not None, "the process was not started"
        return pid

    @property
    def returncode(self) -> int | None:
        """The exit code (``-N`` when signal N ended it), ``None`` while it runs."""
        if self._code is None:
            self._code = self.process.exitcode
            if self._code is not None:
                self.process.close()
        return self._code

    def send_signal(self, signum: int) -> None:
        """Deliver ``signum`` to the child (nothing if it has exited)."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        """Wait for the exit; its code."""
        if self.returncode is None:
            # The sentinel turns readable when the fork server reports the exit.
            loop = asyncio.get_running_loop()
            exited: asyncio.Future[None] = loop.create_future()
            sentinel = self.process.sentinel
            loop.add_reader(sentinel, _settle, exited)
            try:
                await exited
            finally:
                loop.remove_reader(sentinel)
        code = self.returncode
        assert code is not None, "the sentinel turned readable before the exit code"
        return code


@dataclass
class WarmLauncher:
    """Starts bot processes from a fork server that preloaded :data:`PRELOAD`."""

    preload: Sequence[str] = PRELOAD
    _context: multiprocessing.context.ForkServerContext = field(init=False)

    def __post_init__(self) -> None:
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(list(self.preload))

    async def start(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log_path: Path
    ) -> WarmProcess:
        """Fork ``python -m bot <argv>`` with exactly ``env``; stdout is discarded."""
        # Daemonic: one left running when the test process exits is killed, not waited for.
        process = self._context.Process(
            target=_run_bot,
            args=(list(argv), str(cwd), dict(env), str(log_path)),
            daemon=True,
        )
        # The first start launches the fork server (seconds of imports): off the test's loop.
        await asyncio.to_thread(process.start)
        return WarmProcess(process)
