"""The demo shop's MCP server as a real child process, for tests (``python -m bot shop-mcp``)."""

import signal
import subprocess
import sys
from pathlib import Path

from mcp import StdioServerParameters

from bot.testing.ports import free_port, wait_for_http
from bot.testing.settings import child_environment


def shop_server_environment(redis_url: str, key_prefix: str) -> dict[str, str]:
    """The variables the server reads: the test's Redis and key prefix, nothing else of ours."""
    return {
        "REDIS_URL": redis_url,
        "REDIS_KEY_PREFIX": key_prefix,
        "LOG_LEVEL": "WARNING",
    }


def stdio_parameters(redis_url: str, key_prefix: str, cwd: Path) -> StdioServerParameters:
    """How the SDK's client starts the server over stdin/stdout (``--stdio``)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "bot", "shop-mcp", "--stdio"],
        env=shop_server_environment(redis_url, key_prefix),
        # No .env of the developer's is read: the test's settings are the only ones.
        cwd=str(cwd),
    )


class DemoShopMcpProcess:
    """``python -m bot shop-mcp --port <free>`` against a test's Redis; stopped with SIGTERM."""

    def __init__(self, redis_url: str, key_prefix: str, cwd: Path) -> None:
        self.port = free_port()
        self._redis_url = redis_url
        self._key_prefix = key_prefix
        self._cwd = cwd
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The streamable HTTP endpoint."""
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, timeout_seconds: float = 20.0) -> None:
        """Start the process and wait until it answers HTTP."""
        environment = child_environment(
            **shop_server_environment(self._redis_url, self._key_prefix)
        )
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bot", "shop-mcp", "--port", str(self.port)],
            cwd=self._cwd,
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            wait_for_http(self.port, self._process, within=timeout_seconds, name="shop-mcp")
        except RuntimeError as exc:
            stderr = self._process.stderr.read() if self._process.stderr else b""
            raise RuntimeError(f"{exc}: {stderr.decode(errors='replace')}") from exc
        except TimeoutError:
            self.stop()
            raise

    def stop(self, timeout_seconds: float = 10.0) -> int | None:
        """SIGTERM, then wait; returns the exit code (``None`` if it had to be killed)."""
        process = self._process
        if process is None:
            return None
        self._process = None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = None
        if process.stderr is not None:
            process.stderr.close()
        return code
