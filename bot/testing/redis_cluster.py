"""A 6-node Redis Cluster (3 masters, 3 replicas) on loopback, for the suite."""

import subprocess
import time

from bot.testing.redis_server import RedisServer, free_port

# Long enough that a node busy on a loaded 2-core machine is not voted out (a
# fail-over in the middle of a test disconnects its clients). A test that kills a
# master runs a cluster of its own with a shorter timeout.
NODE_TIMEOUT_MS = 5000


class RedisClusterProcesses:
    """Six ``redis-server --cluster-enabled yes`` joined by ``redis-cli --cluster create``."""

    def __init__(self, *, node_timeout_ms: int = NODE_TIMEOUT_MS) -> None:
        self.nodes: list[RedisServer] = []
        self._node_timeout_ms = node_timeout_ms

    @property
    def url(self) -> str:
        """``redis://`` URL of the first node (a client discovers the rest)."""
        return self.nodes[0].url

    def start(self) -> None:
        """Start the nodes, create the cluster, wait for ``cluster_state:ok`` everywhere."""
        for _ in range(6):
            node = RedisServer(
                extra_args=[
                    "--cluster-enabled",
                    "yes",
                    # Relative to the node's own --dir.
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    str(self._node_timeout_ms),
                    # The default bus port (port + 10000) may be taken or past 65535.
                    "--cluster-port",
                    str(free_port()),
                ]
            )
            node.start()
            self.nodes.append(node)
        subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *(f"127.0.0.1:{node.port}" for node in self.nodes),
                "--cluster-replicas",
                "1",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(self._state(node) == "ok" for node in self.nodes) and self._replicas_synced():
                return
            time.sleep(0.1)
        raise RuntimeError("the test cluster did not reach cluster_state:ok")

    def cli(self, node: RedisServer, *args: str) -> str:
        """Run one ``redis-cli`` command against ``node``; its output as text."""
        return subprocess.run(
            ["redis-cli", "-p", str(node.port), *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout

    def masters(self) -> list[RedisServer]:
        """The running nodes that are masters now."""
        return [
            node for node in self._running() if self.cli(node, "ROLE").split()[:1] == ["master"]
        ]

    def failed_over(self, killed: RedisServer) -> bool:
        """Whether a replica replaced ``killed`` (stopped): three masters, every survivor ok."""
        survivors = self._running()
        if killed in survivors:
            return False
        try:
            return len(self.masters()) == 3 and all(self._state(node) == "ok" for node in survivors)
        except subprocess.SubprocessError:
            return False

    def _running(self) -> list[RedisServer]:
        return [node for node in self.nodes if node.running]

    def _state(self, node: RedisServer) -> str:
        for line in self.cli(node, "CLUSTER", "INFO").splitlines():
            if line.startswith("cluster_state:"):
                return line.split(":", 1)[1].strip()
        return "unknown"

    def _replicas_synced(self) -> bool:
        roles = [self.cli(node, "ROLE").split()[0] for node in self.nodes]
        if roles.count("master") != 3 or roles.count("slave") != 3:
            return False
        # A replica's first sync starts seconds after the create; wait for it to end.
        return all(
            "master_link_status:up" in self.cli(node, "INFO", "replication")
            for node, role in zip(self.nodes, roles, strict=True)
            if role == "slave"
        )

    def close(self) -> None:
        """Stop every node and remove their directories."""
        for node in self.nodes:
            node.close()
