"""The suite's readiness check wants an HTTP answer, not just a connected socket.

CI once failed because a bare ``connect()`` loop reported an MCP server ready
before it listened (a TCP self-connect echoes what is sent, like the echo server
here), and the bot then met a refused connection.
"""

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bot.testing.ports import answers_http, free_port, wait_for_http


@contextmanager
def tcp_server(reply: bytes | None) -> Iterator[int]:
    """A one-connection-at-a-time server that echoes (``reply=None``) or writes ``reply``."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = int(listener.getsockname()[1])
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                data = conn.recv(1024)
                conn.sendall(data if reply is None else reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        thread.join()
        listener.close()


def test_a_socket_that_echoes_the_request_is_not_a_ready_server() -> None:
    with tcp_server(None) as port:
        assert not answers_http(port)


def test_an_http_status_line_is_a_ready_server() -> None:
    with tcp_server(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n") as port:
        assert answers_http(port)


def test_nothing_listening_is_not_ready() -> None:
    assert not answers_http(free_port())


def test_waiting_on_a_process_that_exits_says_so() -> None:
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(RuntimeError, match="exit code 3"):
        wait_for_http(free_port(), process, within=20, name="the server")


def test_free_ports_lie_below_the_range_outgoing_connections_take_theirs_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once picked, no client socket of the suite can take the port before its server does."""
    with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as ranges:
        ephemeral_low = int(ranges.read().split()[0])
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    second = {free_port() for _ in range(50)}
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    third = {free_port() for _ in range(50)}
    assert all(port < ephemeral_low for port in second | third)
    # Each xdist worker picks from a slice of its own: two workers never share a port.
    assert max(second) < min(third)
