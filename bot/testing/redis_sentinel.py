"""A master, a replica and three Sentinels on loopback: fail-over for real."""

import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

from bot.testing.redis_server import RedisServer, free_port

SERVICE = "suite-master"


class SentinelProcess:
    """One ``redis-server --sentinel`` watching :data:`SERVICE`."""

    def __init__(self, master_port: int, directory: str) -> None:
        self.port = free_port()
        self.run_id = secrets.token_hex(20)
        self._master_port = master_port
        self._directory = directory
        self._config = Path(directory) / f"sentinel-{self.port}.conf"
        self._process: subprocess.Popen[bytes] | None = None

    def write_config(self, replica_port: int, others: "list[SentinelProcess]") -> None:
        """Its configuration, naming the replica and the other Sentinels it would discover.

        A Sentinel writes these ``known-*`` lines itself once it has met them (hello
        messages every 2 s); written ahead, the group votes from the start, as after
        a restart.
        """
        known = "".join(
            f"sentinel known-sentinel {SERVICE} 127.0.0.1 {other.port} {other.run_id}\n"
            for other in others
        )
        self._config.write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            f"dir {self._directory}\n"
            f"sentinel myid {self.run_id}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self._master_port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
            f"sentinel failover-timeout {SERVICE} 5000\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
            f"sentinel known-replica {SERVICE} 127.0.0.1 {replica_port}\n" + known
        )

    def start(self) -> None:
        """Start and wait until it answers PING."""
        binary = shutil.which("redis-server")
        assert binary is not None
        self._process = subprocess.Popen(
            [binary, str(self._config), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for_pong(self.port)

    def close(self) -> None:
        """Stop the Sentinel."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=10)
            self._process = None


class SentinelGroup:
    """A master, one replica of it, three Sentinels; ``addresses`` is ``REDIS_SENTINELS``."""

    def __init__(self) -> None:
        self.master = RedisServer()
        self.replica = RedisServer(extra_args=["--replicaof", "127.0.0.1", str(self.master.port)])
        self.sentinels: list[SentinelProcess] = []

    @property
    def addresses(self) -> str:
        """``host:port,...`` of the Sentinels."""
        return ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self.sentinels)

    def start(self) -> None:
        """Start everything; returns once the replica is in sync and every Sentinel sees it."""
        self.master.start()
        self.replica.start()
        group = [SentinelProcess(self.master.port, self.master.directory) for _ in range(3)]
        for sentinel in group:
            sentinel.write_config(
                self.replica.port, [other for other in group if other is not sentinel]
            )
            sentinel.start()
            self.sentinels.append(sentinel)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if _link_up(self.replica.port) and all(
                _sentinel_sees(sentinel.port) for sentinel in self.sentinels
            ):
                return
            time.sleep(0.1)
        raise RuntimeError("the Sentinel group did not come up")

    def close(self) -> None:
        """Stop everything."""
        for sentinel in self.sentinels:
            sentinel.close()
        self.replica.close()
        self.master.close()


def _cli(port: int, *args: str) -> str:
    return subprocess.run(
        ["redis-cli", "-p", str(port), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout


def _link_up(port: int) -> bool:
    return "master_link_status:up" in _cli(port, "INFO", "replication")


def _sentinel_sees(port: int) -> bool:
    # Each Sentinel must know the replica (to promote it) and the two other Sentinels (to vote).
    info = _cli(port, "SENTINEL", "MASTER", SERVICE).split()
    fields = dict(zip(info[::2], info[1::2], strict=False))
    return fields.get("num-slaves") == "1" and fields.get("num-other-sentinels") == "2"


def _wait_for_pong(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"Sentinel did not start on port {port}")
