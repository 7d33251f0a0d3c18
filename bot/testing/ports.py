"""Free ports and a readiness check for the HTTP servers the suite starts as processes.

A bare ``connect()`` is not proof that a server listens: when nothing listens on
an ephemeral-range port yet, Linux may pick that very port as the client's source
and connect the socket to itself (a TCP self-connect), so a retry loop "succeeds"
before the server is up. The check therefore asks for an HTTP status line, which
only a server writes back.
"""

import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

LISTEN_BACKLOG = 4096
"""Connections a fake server's socket holds before it accepts them (Linux caps it at
``net.core.somaxconn``, 4096 by default): a burst of 1,000 customers opens hundreds at
once, and past the queue the kernel drops them, each client retrying a second later."""

_POOL_SIZE = 12_000
"""Ports below the kernel's ephemeral range that the suite picks from."""
_EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"


def free_port() -> int:
    """A TCP port nobody listens on right now, for a server a test starts later.

    Picked below the kernel's ephemeral range: a port from ``bind(0)`` lies inside
    it, and between the pick and the server's own bind any outgoing connection
    (the suite opens thousands) may take it as its source port ("Address already
    in use" at a process's start). Each pytest-xdist worker picks from its own
    slice, so two workers never hand out the same port.
    """
    low, high = _pool()
    for _ in range(200):
        port = low + secrets.randbelow(high - low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pool() -> tuple[int, int]:
    """This process's slice of the ports below the ephemeral range: ``[low, high)``."""
    try:
        ephemeral_low = int(Path(_EPHEMERAL_RANGE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32_768
    low = max(1_024, ephemeral_low - _POOL_SIZE)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker) if worker.isdigit() else 0
    size = (ephemeral_low - low) // max(workers, 1)
    return low + index * size, low + (index + 1) * size


def answers_http(port: int, *, timeout: float = 0.5) -> bool:
    """Whether an HTTP server on 127.0.0.1:``port`` answers a request (any status)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            if conn.getsockname() == conn.getpeername():
                return False
            conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return conn.recv(5) == b"HTTP/"
    except OSError:
        return False


def wait_for_http(
    port: int, process: "subprocess.Popen[bytes]", *, within: float, name: str
) -> None:
    """Return once ``process`` answers HTTP on ``port``; raise if it exits or ``within`` ends."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited at start-up (exit code {process.returncode})")
        if answers_http(port):
            return
        time.sleep(0.02)
    raise TimeoutError(f"{name} did not answer HTTP on port {port} within {within} s")
