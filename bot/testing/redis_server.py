"""A private redis-server for the suite: free port, no persistence unless asked, stoppable.

``extra_args`` come last and win: ``("--appendonly", "yes", "--appendfsync", "always")``
gives a server that keeps every acknowledged write across :meth:`RedisServer.stop`
(SIGKILL) and :meth:`RedisServer.start` (same port, same directory).
"""

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence

from bot.testing.ports import free_port

__all__ = ["RedisServer", "free_port"]


class RedisServer:
    """Starts ``redis-server`` on 127.0.0.1 so tests can stop and restart it at will."""

    def __init__(self, port: int | None = None, *, extra_args: Sequence[str] = ()) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (./scripts/test installs it)")
        self._binary = binary
        self.port = port or free_port()
        self._dir = tempfile.mkdtemp(prefix="redis-test-")
        self._process: subprocess.Popen[bytes] | None = None
        self._extra_args = tuple(extra_args)

    @property
    def url(self) -> str:
        """The ``redis://`` URL of this server (database 0)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        if self._process is not None:
            return
        # Fixed arguments and the binary found on PATH: nothing from outside the suite.
        self._process = subprocess.Popen(
            [
                self._binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._dir,
                "--protected-mode",
                "yes",
                # A replica's first sync starts at once, not after the default 5 s wait
                # for more replicas to share one diskless transfer.
                "--repl-diskless-sync-delay",
                "0",
                *self._extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    @property
    def directory(self) -> str:
        """The server's working directory (cluster and Sentinel state files live here)."""
        return self._dir

    @property
    def running(self) -> bool:
        """Whether the server was started and not stopped since."""
        return self._process is not None

    def stop(self) -> None:
        """Kill the server at once (SIGKILL: only what it wrote to disk, if anything, is kept)."""
        if self._process is None:
            return
        self._process.kill()
        self._process.wait(timeout=10)
        self._process = None

    def close(self) -> None:
        """Stop and remove the working directory."""
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
