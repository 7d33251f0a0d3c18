"""``tail --follow`` in its own process: prints entries as they arrive, Ctrl-C ends it cleanly."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bot.testing.audit_entries import append, simple_turn
from bot.testing.redis_server import RedisServer
from tests.audit.conftest import STREAM

WAIT_SECONDS = 20

# A process started in the background by a non-interactive shell (as CI may start the
# suite) inherits an *ignored* SIGINT, and Python then never raises KeyboardInterrupt.
# The child restores the default Ctrl-C behaviour of a terminal before running the CLI
# exactly as ``python -m bot.support_audit.cli`` would.
_CHILD = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from bot.support_audit.cli import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


class _Follower:
    """The CLI as a child process, its stdout read line by line on a thread."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CHILD, *argv],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def lines(self, count: int) -> list[str]:
        """The next ``count`` lines (fails after WAIT_SECONDS without one)."""
        got = []
        for _ in range(count):
            line = self._lines.get(timeout=WAIT_SECONDS)
            assert line is not None, f"the follower ended early: {self.stderr()}"
            got.append(line)
        return got

    def interrupt(self) -> int:
        """Ctrl-C, then the exit status."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=WAIT_SECONDS)

    def stderr(self) -> str:
        assert self.process.stderr is not None
        return self.process.stderr.read() if self.process.poll() is not None else ""

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=WAIT_SECONDS)
        self._reader.join(timeout=WAIT_SECONDS)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def follow_env(redis_server: RedisServer) -> dict[str, str]:
    """The child's environment: the suite's Redis and stream, no pseudonyms."""
    env = {
        key: value
        for key, value in os.environ.items()
        # No COLUMNS either (pytest-xdist's workers have one): the child writes to a pipe.
        if not key.startswith(("AUDIT_", "REDIS_", "TELEGRAM_", "OPENAI_")) and key != "COLUMNS"
    }
    env.update(REDIS_URL=redis_server.url, AUDIT_STREAM=STREAM, PYTHONUNBUFFERED="1")
    return env


@pytest.fixture
def start_follower(follow_env: dict[str, str], tmp_path: Path) -> Iterator[object]:
    followers: list[_Follower] = []

    def start(*argv: str) -> _Follower:
        follower = _Follower(list(argv), follow_env, tmp_path)
        followers.append(follower)
        return follower

    yield start
    for follower in followers:
        follower.close()


def test_follow_prints_the_tail_then_new_matching_entries_and_ends_on_ctrl_c(
    sync_redis: redis.Redis, start_follower
) -> None:
    old_ids = append(sync_redis, STREAM, simple_turn("BEFORESTART"))
    follower = start_follower("tail", "--follow", "--json", "--type", "tool")
    (tail,) = follower.lines(1)

    new_ids = []
    for index in range(3):
        new_ids += append(
            sync_redis, STREAM, simple_turn(f"LIVE{index:06d}", tools=("get_order_status",))
        )
    followed = follower.lines(3)

    assert follower.interrupt() == 0
    assert follower.stderr() == ""
    # Only tool entries pass the filter: the old turn's one, then one per new turn, in order.
    assert json.loads(tail)["id"] == old_ids[0]
    assert [json.loads(line)["id"] for line in followed] == new_ids[0::2]
    assert {json.loads(line)["type"] for line in followed} == {"tool"}


def test_follow_table_lines_arrive_as_entries_are_added(
    sync_redis: redis.Redis, start_follower
) -> None:
    append(sync_redis, STREAM, simple_turn("BEFORESTART"))
    follower = start_follower("tail", "--follow", "-n", "1", "--utc")
    header, first = follower.lines(2)

    append(sync_redis, STREAM, simple_turn("LIVETABLE1", tools=()))
    (live,) = follower.lines(1)

    assert follower.interrupt() == 0
    assert header.split()[:3] == ["TIME", "TYPE", "CHAT"]
    assert "BEFORESTART" in first
    assert " turn " in first
    assert "LIVETABLE1" in live
    assert live.index("answered") == header.index("STATUS")


def test_export_follow_keeps_exporting_new_entries_until_ctrl_c(
    sync_redis: redis.Redis, start_follower
) -> None:
    old_ids = append(sync_redis, STREAM, simple_turn("BEFORESTART"))
    follower = start_follower("export", "--group", "siem", "--follow")
    exported = follower.lines(2)

    new_ids = append(sync_redis, STREAM, simple_turn("LIVEEXPORT"))
    exported += follower.lines(2)
    # A line is acknowledged just after it is written: wait (bounded) for the last ack.
    deadline = time.monotonic() + WAIT_SECONDS
    while sync_redis.xpending(STREAM, "siem")["pending"] and time.monotonic() < deadline:
        time.sleep(0.02)

    assert sync_redis.xpending(STREAM, "siem")["pending"] == 0
    assert follower.interrupt() == 0
    assert [json.loads(line)["id"] for line in exported] == old_ids + new_ids
