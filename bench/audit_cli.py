"""``python -m bench.audit_cli``: the staff CLI on a long audit stream, without and with its index.

Fills a private redis-server with ``--entries`` realistic entries (two tool
entries and a turn entry per turn, ~230 bytes an entry, 5,000 chats, a few
handoffs), pipelined:

- ``stream``: plain ``XADD`` as versions before the index wrote them (the CLI
  then reads the stream, as it did before);
- ``index``: the sink's write-once script, which also writes the index.

Entry ids are the server's (all of them minutes apart at most), so the rollups
of one fill span a few minutes; ``--spread-minutes`` then copies the newest
minute's rollup onto each minute of the period, as two days of traffic leave
them, so that ``stats`` reads as many minutes as it would (2,880 for two days).

Per command, the wall time of ``python -m bot audit ...`` (a new process, as
staff run it); and the write cost: Redis commands and memory per turn and
per entry. Prints one JSON object.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import redis

from bot.audit.index import write_once
from bot.audit.schema import HandoffAuditEntry
from bot.storage.keys import RedisKeys
from bot.storage.scripts.audit import WriteOnce
from bot.testing.audit_entries import simple_turn
from bot.testing.redis_server import RedisServer

STREAM = "support:audit"
STAFF_CHAT = -1001
CHATS = 5000
BATCH = 2000


def _rows(number: int) -> list[dict[str, str]]:
    chat = str(100_000_000 + number % CHATS)
    turn_id = f"T{number:09d}"
    entries = simple_turn(turn_id, chat_id=chat, tools=("get_order_status", "search_help_center"))
    rows = [entry.to_fields() for entry in entries]
    if number % 500 == 0:
        rows.append(
            HandoffAuditEntry(chat_id=chat, turn_id=turn_id, event="opened", trigger="tool")
            .to_fields()
        )  # fmt: skip
    return rows


def fill(client: redis.Redis, entries: int, indexed: bool) -> dict[str, Any]:
    """Write ``entries`` entries (whole turns); the write cost per turn and per entry."""
    client.config_resetstat()
    before = int(client.info("memory")["used_memory"])
    started = time.perf_counter()
    sha = client.script_load(WriteOnce.SOURCE)
    keys_of = RedisKeys.audit_index(STREAM)
    written = turns = 0
    pipe = client.pipeline(transaction=False)
    while written < entries:
        rows = _rows(turns)
        turns += 1
        written += len(rows)
        if indexed:
            done = RedisKeys.audit_done(STREAM, rows[0]["turn_id"])
            call = write_once(
                keys_of, STREAM, done, rows, maxlen=10_000_000, done_ttl_seconds=86400
            )
            keys = call.keys()
            pipe.evalsha(sha, len(keys), *keys, *call.args())
        else:
            for row in rows:
                pipe.xadd(STREAM, row)  # type: ignore[arg-type]
        if turns % BATCH == 0:
            pipe.execute()
    pipe.execute()
    seconds = time.perf_counter() - started
    stats = client.info("commandstats")
    # Inside a script: every command it ran; plain XADD: the XADDs themselves.
    inner = sum(
        int(value["calls"])
        for name, value in stats.items()
        if name not in ("cmdstat_evalsha", "cmdstat_script|load", "cmdstat_config|resetstat")
    )
    memory = int(client.info("memory")["used_memory"]) - before
    return {
        "entries": written,
        "turns": turns,
        "fill_s": round(seconds, 1),
        "redis_commands_per_turn": round(inner / turns, 1),
        "round_trips_per_turn": 1 if indexed else round(written / turns, 2),
        "memory_bytes_per_entry": round(memory / written, 1),
    }


def spread(client: redis.Redis, minutes: int) -> None:
    """Copy the newest minute's rollup onto each of the ``minutes`` before it."""
    keys = RedisKeys.audit_index(STREAM)
    newest = int(str(client.zrange(keys.minutes, -1, -1)[0]))
    row = {str(name): str(value) for name, value in client.hgetall(keys.minute(newest)).items()}
    pipe = client.pipeline(transaction=False)
    for minute in range(newest - minutes, newest):
        pipe.hset(keys.minute(minute), mapping=row)  # type: ignore[arg-type]
        pipe.pfadd(keys.minute_chats(minute), *(str(100_000_000 + n) for n in range(50)))
        pipe.zadd(keys.minutes, {str(minute): minute})
    pipe.execute()


def time_cli(url: str, arguments: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Wall time and exit status of one ``python -m bot audit`` run."""
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "bot", "audit", *arguments],
        env={**env, "REDIS_URL": url},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    return {
        "s": round(time.perf_counter() - started, 2),
        "exit": result.returncode,
        "lines": len(result.stdout.splitlines()),
    }


def commands(existing_turn: str) -> dict[str, list[str]]:
    """The commands timed, by name."""
    return {
        "help": ["--help"],
        "turn_old": ["turn", existing_turn],
        "turn_unknown": ["turn", "ZZZZZZZZZZ"],
        "tail_chat": ["tail", "--chat", "100000007"],
        "tail_chat_unknown": ["tail", "--chat", "42"],
        "tail_tool_unknown": ["tail", "--tool", "no_such_tool"],
        "handoffs": ["handoffs"],
        "stats_24h": ["stats", "--since", "24h"],
    }


def main() -> None:
    """Fill, time, print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=300_000)
    parser.add_argument("--mode", choices=("stream", "index"), default="index")
    parser.add_argument("--spread-minutes", type=int, default=2880)
    parser.add_argument("--only", nargs="*", help="command names to time")
    args = parser.parse_args()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AUDIT_", "REDIS_", "STAFF_"))
    }
    env |= {"AUDIT_STREAM": STREAM, "STAFF_CHAT_ID": str(STAFF_CHAT), "COLUMNS": "120"}
    server = RedisServer()
    server.start()
    try:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        report: dict[str, Any] = {
            "mode": args.mode,
            "write": fill(client, args.entries, args.mode == "index"),
        }
        if args.mode == "index" and args.spread_minutes:
            spread(client, args.spread_minutes)
        keys = RedisKeys("support")
        for number in range(10):
            chat = f"tg:{100_000_000 + number * 500}"
            client.zadd(keys.open_handoffs(STAFF_CHAT), {chat: number})
            client.hset(keys.conversation(chat).session, "h", "waiting")
        report["memory_total_mb"] = round(int(client.info("memory")["used_memory"]) / 2**20, 1)
        chosen = commands("T000000003")
        report["commands"] = {
            name: time_cli(server.url, arguments, env)
            for name, arguments in chosen.items()
            if not args.only or name in args.only
        }
        client.close()
    finally:
        server.stop()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
