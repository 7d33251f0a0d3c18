"""Free ports and a readiness check for the HTTP servers the suite starts as processes.

A bare ``connect()`` is not proof that a server listens: when nothing listens on
an ephemeral-range port yet, Linux may pick that very port as the client's source
and connect the socket to itself (a TCP self-connect), so a retry loop "succeeds"
before the server is up. The check therefore asks for an HTTP status line, which
only a server writes back.
"""

import socket
import subprocess
import time


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
