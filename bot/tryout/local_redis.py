"""A private ``redis-server`` to try the bot: the console and the staff CLI without ``REDIS_URL``.

Only ``python -m bot console`` and ``python -m bot audit`` use it, and only when
``REDIS_URL`` is set nowhere: a production process never invents its own Redis.
The server listens on 127.0.0.1 on a free port, keeps its data in one directory
(``LOCAL_REDIS_DIR``, ``.data`` in the checkout by default) as an append-only
file, so conversations and the audit survive a restart, and is stopped when its
last user lets go of it.

Several processes may use one directory at once (a console and an audit
command, two consoles): the first one starts the server and writes its pid and
port to ``redis.json``; the others find it there and connect. Every user holds a
shared ``flock`` on ``users.lock`` for as long as it uses the server; the one
that can turn it into an exclusive lock on leaving is the last and stops the
server. Starting, joining and stopping all happen under an exclusive lock on
``start.lock``, so nobody joins a server that is being stopped, and two servers
never write one append-only file.

A server is only ever trusted when it answers on the recorded port with the
recorded process id: a stale ``redis.json`` (the machine rebooted, the server
was killed) or a port someone else took since is never used.
"""

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pydantic import SecretStr

from bot.settings import RedisSettings

INSTALL_HINT = (
    "redis-server is not installed: install it (sudo apt-get install redis-server, "
    "or brew install redis) or set REDIS_URL to a Redis of yours"
)
"""The one line for a machine without ``redis-server`` on ``PATH``."""

STATE_FILE = "redis.json"
START_LOCK = "start.lock"
USERS_LOCK = "users.lock"
LOG_FILE = "redis.log"
PID_FILE = "redis.pid"

_START_ATTEMPTS = 3
"""Free ports tried: another program may take the one we picked before the server binds it."""


class LocalRedisError(RuntimeError):
    """The private server cannot be started or joined; ``str()`` is one line for the operator."""


@dataclass(frozen=True, kw_only=True)
class LocalRedisServer:
    """The server in use: where it listens, its process, whether this process started it."""

    port: int
    pid: int
    directory: Path
    started_here: bool

    @property
    def url(self) -> str:
        """The ``redis://`` URL of the server (database 0)."""
        return f"redis://127.0.0.1:{self.port}/0"


class LocalRedis:
    """Starts (or joins) the private server of ``directory``; stops it when the last user leaves.

    ``acquire`` and ``release`` (or ``with``) bracket one process's use of it.
    """

    def __init__(
        self, directory: Path, *, binary: str | None = None, timeout_seconds: float = 10.0
    ) -> None:
        self._directory = directory.expanduser().resolve()
        self._binary = binary
        self._timeout = timeout_seconds
        self._users: IO[bytes] | None = None
        self._server: LocalRedisServer | None = None

    @property
    def directory(self) -> Path:
        """Where the server keeps its data, its log and the files above."""
        return self._directory

    def acquire(self) -> LocalRedisServer:
        """The directory's running server, started if there is none, or :class:`LocalRedisError`."""
        if self._server is not None:
            return self._server
        binary = self._binary or shutil.which("redis-server")
        if binary is None:
            raise LocalRedisError(INSTALL_HINT)
        try:
            self._directory.mkdir(parents=True, exist_ok=True)
            with self._start_lock():
                users = (self._directory / USERS_LOCK).open("ab")
                fcntl.flock(users, fcntl.LOCK_SH)
                try:
                    server = self._running() or self._start(binary)
                except BaseException:
                    users.close()
                    raise
        except OSError as error:
            raise LocalRedisError(
                f"LOCAL_REDIS_DIR {self._directory} cannot be used: "
                f"{error.strerror or type(error).__name__}"
            ) from error
        self._users = users
        self._server = server
        return server

    def release(self) -> None:
        """Stop using the server; the last user stops it (the data stay on disk)."""
        users, server = self._users, self._server
        if users is None or server is None:
            return
        self._users = self._server = None
        with self._start_lock():
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                users.close()  # someone else still uses it: they stop it
                return
            try:
                self._stop(server)
            finally:
                users.close()

    def __enter__(self) -> LocalRedisServer:
        """:meth:`acquire`."""
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        """:meth:`release`, also after an error or Ctrl-C."""
        self.release()

    @contextlib.contextmanager
    def _start_lock(self) -> Iterator[None]:
        with (self._directory / START_LOCK).open("ab") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _running(self) -> LocalRedisServer | None:
        """The server ``redis.json`` names, if it answers there as that very process."""
        try:
            state = json.loads((self._directory / STATE_FILE).read_text(encoding="utf-8"))
            port, pid = int(state["port"]), int(state["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if _server_pid(port, timeout=1.0) != pid:
            return None
        return LocalRedisServer(port=port, pid=pid, directory=self._directory, started_here=False)

    def _start(self, binary: str) -> LocalRedisServer:
        state, pidfile = self._directory / STATE_FILE, self._directory / PID_FILE
        state.unlink(missing_ok=True)
        for _ in range(_START_ATTEMPTS):
            pidfile.unlink(missing_ok=True)
            port = _free_port()
            # Daemonized: never this process's child (no zombie, whoever stops it), in a
            # session of its own (Ctrl-C in the terminal reaches the console, which stops
            # it in order, and never a server another console still uses).
            try:
                launched = self._launch(binary, port, pidfile)
            except subprocess.TimeoutExpired:
                break
            if not launched:
                break
            pid = self._wait_until_up(pidfile, port)
            if pid is not None:
                state.write_text(json.dumps({"port": port, "pid": pid}), encoding="utf-8")
                return LocalRedisServer(
                    port=port, pid=pid, directory=self._directory, started_here=True
                )
        raise LocalRedisError(
            f"the private redis-server did not start in {self._directory}: {self._last_log_line()}"
        )

    def _launch(self, binary: str, port: int, pidfile: Path) -> bool:
        """Run ``redis-server --daemonize yes``: true once the daemon forked off."""
        launcher = subprocess.run(  # noqa: S603 - fixed arguments, the binary found on PATH
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--protected-mode",
                "yes",
                "--dir",
                str(self._directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
                "--logfile",
                str(self._directory / LOG_FILE),
                "--daemonize",
                "yes",
                "--pidfile",
                str(pidfile),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=self._timeout,
            check=False,
        )
        return launcher.returncode == 0

    def _wait_until_up(self, pidfile: Path, port: int) -> int | None:
        """The server's pid once it answers on ``port``; ``None`` when it exited (a taken port)."""
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            pid = _read_pid(pidfile)
            if pid is not None:
                if not _alive(pid):
                    return None
                if _server_pid(port, timeout=0.2) == pid:
                    return pid
            time.sleep(0.02)
        if (pid := _read_pid(pidfile)) is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)  # it runs but does not answer: not ours to keep
        return None

    def _stop(self, server: LocalRedisServer) -> None:
        """SIGTERM (the append-only file is fsynced first), wait for the exit, forget it."""
        if _server_pid(server.port, timeout=1.0) == server.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(server.pid, signal.SIGTERM)
            # Redis removes its pid file and closes its port after the last fsync; the
            # process itself may linger as a zombie of whoever adopted it.
            deadline = time.monotonic() + self._timeout
            pidfile = self._directory / PID_FILE
            while time.monotonic() < deadline and _alive(server.pid):
                if not pidfile.exists() and _server_pid(server.port, timeout=0.2) is None:
                    break
                time.sleep(0.02)
        (self._directory / STATE_FILE).unlink(missing_ok=True)

    def _last_log_line(self) -> str:
        try:
            lines = (self._directory / LOG_FILE).read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        last = next((line for line in reversed(lines) if line.strip()), "")
        # Redis log lines start with "pid:role date time level": the message follows.
        return last.split(" * ", 1)[-1].split(" # ", 1)[-1].strip() or "no log line"


@contextlib.contextmanager
def redis_or_private(
    settings: RedisSettings,
) -> Iterator[tuple[RedisSettings, LocalRedisServer | None]]:
    """``settings`` as given when ``REDIS_URL`` is set (or Sentinels are); else the private server.

    Without ``REDIS_URL`` the private server of ``LOCAL_REDIS_DIR`` is started or
    joined and the settings point at it until the block ends (an error and Ctrl-C
    too). For the console and the staff CLI only; :class:`LocalRedisError` when it
    cannot run.
    """
    if settings.url_is_set or settings.mode != "standalone":
        yield settings, None
        return
    local = LocalRedis(settings.local_dir)
    server = local.acquire()
    try:
        yield settings.model_copy(update={"url": SecretStr(server.url)}), server
    finally:
        local.release()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_pid(port: int, *, timeout: float) -> int | None:
    """The ``process_id`` the Redis on ``port`` reports, or ``None`` (nothing, or not Redis)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            conn.sendall(b"INFO server\r\n")
            reply = b""
            while b"process_id:" not in reply or not reply.endswith(b"\r\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                reply += chunk
                if len(reply) > 1 << 20:
                    return None
    except OSError:
        return None
    for line in reply.decode("utf-8", "replace").splitlines():
        name, _, value = line.partition(":")
        if name == "process_id" and value.strip().isdigit():
            return int(value)
    return None


def _read_pid(pidfile: Path) -> int | None:
    try:
        text = pidfile.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # somebody else's process has this pid now
    return True
