"""A fresh clone's try-out: ``python -m bot console`` and the audit CLI with nothing set.

Real processes in an empty directory (no ``.env``), an environment with none of
the bot's variables: no key (the offline demo model) and no ``REDIS_URL`` (a
private redis-server, its data under ``LOCAL_REDIS_DIR`` in the test's directory).
"""

import io
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot import customer_texts
from bot.app import build_application
from bot.console import Console, ConsoleScreen
from bot.testing.redis_server import RedisServer
from bot.testing.settings import child_environment, make_settings
from bot.tryout.local_redis import INSTALL_HINT

REDIS_NOTE = re.compile(r"^redis: a private redis-server on 127\.0\.0\.1:(\d+) \(")
MODEL_NOTE = "model: the offline demo (keyword rules, no network) because OPENAI_API_KEY is not set"


def tryout_env(home: Path) -> dict[str, str]:
    """Only PATH and the locale pass; HOME is the test's, the data dir inside it."""
    return child_environment(HOME=str(home), LOCAL_REDIS_DIR=str(home / ".data"))


def run_bot(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=home,
        env=tryout_env(home),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def redis_port(stdout: str) -> int:
    ports = [int(m.group(1)) for line in stdout.splitlines() if (m := REDIS_NOTE.match(line))]
    assert len(ports) == 1, stdout
    return ports[0]


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def metadata(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("model=offline-demo")]


def test_the_console_answers_with_nothing_set_and_keeps_the_conversation(tmp_path: Path):
    first = run_bot(
        tmp_path,
        "console",
        "--session",
        "tryout",
        stdin="Где заказ 8041?\nКакие у вас условия возврата?\n",
    )
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    # One banner line on the model, one on Redis; no configuration error, no exit.
    assert sum(line.startswith("model: ") for line in lines) == 1
    assert any(line.startswith(MODEL_NOTE) and "OPENAI_API_KEY" in line for line in lines)
    assert "Заказ 8041: Передан в службу доставки." in first.stdout
    # The return question is answered from the return-policy article, not the contacts one.
    assert "«Как вернуть товар»" in first.stdout
    assert len(metadata(first.stdout)) == 2
    assert "Код обращения" not in first.stdout
    port = redis_port(first.stdout)
    # Stopped on exit; its append-only data kept in the directory asked for.
    assert not listening(port)
    assert (tmp_path / ".data" / "appendonlydir").is_dir()
    assert not (tmp_path / ".data" / "redis.json").exists()

    again = run_bot(tmp_path, "console", "--session", "tryout", stdin="Спасибо\n")
    assert again.returncode == 0, again.stderr
    # The two earlier exchanges are in the conversation: 4 messages before, 6 after.
    (line,) = metadata(again.stdout)
    assert " history=" in line
    assert line.split(" history=")[1].split()[0].endswith("/6")
    assert not listening(redis_port(again.stdout))


def _read_until(process: subprocess.Popen[bytes], pattern: re.Pattern[str], within: float) -> str:
    """The child's stdout up to a line matching ``pattern`` (the prompt has no newline)."""
    assert process.stdout is not None
    seen = b""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.1)
        if ready:
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                break
            seen += chunk
            text = seen.decode("utf-8", "replace")
            if any(pattern.search(line) for line in text.splitlines()):
                return text
    raise AssertionError(f"{pattern.pattern!r} not seen in: {seen.decode('utf-8', 'replace')}")


def audit_entries(home: Path) -> list[dict[str, object]]:
    result = run_bot(home, "audit", "tail", "-n", "50", "--json")
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_the_audit_cli_reads_the_tryout_data_beside_a_running_console(tmp_path: Path):
    with subprocess.Popen(
        [sys.executable, "-m", "bot", "console", "--session", "staff"],
        cwd=tmp_path,
        env=tryout_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as console:
        assert console.stdin is not None
        try:
            banner = _read_until(console, REDIS_NOTE, within=30)
            port = redis_port(banner)
            console.stdin.write("Где заказ 8041?\n".encode())
            console.stdin.flush()
            _read_until(console, re.compile(r"^model=offline-demo"), within=30)

            # The audit joins the console's server: the turn just had; the server stays up.
            turns = [e for e in audit_entries(tmp_path) if e.get("type") == "turn"]
            assert [(t["chat_id"], t["outcome"]) for t in turns] == [("staff", "answered")]
            assert listening(port)
            console.stdin.write("Где заказ 8041?\n".encode())
            console.stdin.flush()
            _read_until(console, re.compile(r"^model=offline-demo.*history=2/4"), within=30)

            # Ctrl-C: the console exits and stops the server it started.
            console.send_signal(signal.SIGINT)
            assert console.wait(timeout=30) == 130
            assert not listening(port)
        finally:
            if console.poll() is None:
                console.kill()

    # With the console gone, the audit starts the server on the same data, and stops it.
    turns = [e for e in audit_entries(tmp_path) if e.get("type") == "turn"]
    assert len(turns) == 2
    assert not (tmp_path / ".data" / "redis.json").exists()


def test_a_closed_terminal_or_a_kill_still_stops_the_private_server(tmp_path: Path):
    """SIGHUP (the terminal window closed) and SIGTERM end the console as /exit does."""
    for signum in (signal.SIGHUP, signal.SIGTERM):
        with subprocess.Popen(
            [sys.executable, "-m", "bot", "console"],
            cwd=tmp_path,
            env=tryout_env(tmp_path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ) as console:
            try:
                port = redis_port(_read_until(console, REDIS_NOTE, within=30))
                console.send_signal(signum)
                assert console.wait(timeout=30) == 128 + signum
                assert not listening(port)
            finally:
                if console.poll() is None:
                    console.kill()
    assert not (tmp_path / ".data" / "redis.json").exists()


@pytest.mark.parametrize("mode", ["polling", "worker"])
def test_telegram_modes_need_explicit_settings(tmp_path: Path, mode: str):
    """No key, no REDIS_URL, no token: a production mode exits 2 and starts no server."""
    result = run_bot(tmp_path, mode)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert all(line.startswith("configuration error: ") for line in lines)
    assert any("OPENAI_API_KEY is not set" in line for line in lines)
    assert any("REDIS_URL is not set" in line for line in lines)
    assert not (tmp_path / ".data").exists()


async def test_operator_and_asking_for_a_person_answer_alike_without_a_staff_group(
    redis_server: RedisServer,
):
    """«Позовите живого оператора» (the offline demo model) and /operator: one text."""
    settings = make_settings(
        REDIS_URL=redis_server.url, REDIS_KEY_PREFIX="operator-alike", AUDIT_STREAM="oa:audit"
    )
    app = await build_application(settings)
    stdin = io.StringIO("Позовите живого оператора\n/operator\n/exit\n")
    stdout = io.StringIO()
    console = Console(app, "alike", stdin, ConsoleScreen(stdin, stdout, io.StringIO()))
    try:
        assert await console.run() == 0
    finally:
        await app.aclose()
    answers = [
        chunk.split("\nmodel=")[0].split("\nconsole: ")[0].strip()
        for chunk in stdout.getvalue().split("Бот: ")[1:]
    ]
    assert len(answers) == 2
    assert answers[0] == answers[1]
    assert answers[1].startswith(customer_texts.OPERATOR_OFF + "\n\n")
    assert "График (Europe/Moscow): понедельник: 09:00–21:00" in answers[1]


def test_without_redis_server_the_console_says_how_to_install_it(tmp_path: Path):
    env = {**tryout_env(tmp_path), "PATH": str(tmp_path)}  # no redis-server on it
    result = subprocess.run(
        [sys.executable, "-m", "bot", "console"],
        cwd=tmp_path,
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"error: {INSTALL_HINT}"]
    assert "apt-get install redis-server" in result.stderr
