"""The test shop's MCP server (:mod:`bot.testing.mcp_server`) as a child process.

``McpServerProcess`` serves streamable HTTP on a free port of its own, can be
killed and started again on the same port (a shop's server restarting), and
reads back the calls it recorded, which survive its restarts.
"""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bot.testing.ports import free_port, wait_for_http

__all__ = ["McpServerProcess", "free_port"]


class McpServerProcess:
    """One HTTP MCP server process; ``calls_file`` keeps every ``tools/call`` it received."""

    def __init__(
        self, calls_file: Path, *, many: int = 0, authorization: str | None = None
    ) -> None:
        self.calls_file = calls_file
        self.port = free_port()
        self._many = many
        # The Authorization header every HTTP request must carry (None: no check).
        self._authorization = authorization
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's streamable HTTP endpoint."""
        return f"http://127.0.0.1:{self.port}/mcp"

    def stdio_command(self) -> tuple[str, list[str]]:
        """The command and arguments of the same server over stdio (the bot starts it)."""
        return sys.executable, [
            "-m",
            "bot.testing.mcp_server",
            "--transport",
            "stdio",
            "--calls",
            str(self.calls_file),
            "--many",
            str(self._many),
        ]

    def start(self, within: float = 20.0) -> None:
        """Start serving and wait until the server answers HTTP."""
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot.testing.mcp_server",
                "--port",
                str(self.port),
                "--calls",
                str(self.calls_file),
                "--many",
                str(self._many),
                *(["--authorization", self._authorization] if self._authorization else []),
            ],
        )
        wait_for_http(self.port, self._process, within=within, name="the MCP test server")

    def kill(self) -> None:
        """Stop the server at once (SIGKILL), as a crash would."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def restart(self) -> None:
        """Kill the server and start it again on the same port."""
        self.kill()
        self.start()

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """The calls received so far (of ``tool`` only, if given), oldest first."""
        if not self.calls_file.exists():
            return []
        lines = self.calls_file.read_text(encoding="utf-8").splitlines()
        calls = [json.loads(line) for line in lines if line.strip()]
        return [call for call in calls if tool is None or call["tool"] == tool]
