"""``python -m bench.burst``: bursts of customers as an outsider runs them, bot against floor bot.

Every part is a process of its own, started the way someone reading the README
would start it: a private redis-server, the fake Bot API (``python -m
bench.telegram_server``, which also pushes the burst and notes each answer),
the scripted model (``python -m bench.model_server``, ``--latency`` seconds a
request, 1 s by default), and either the bot (``python -m bot polling``, plus
``python -m bot worker`` when a burst asks for two processes) with **default
settings** (only the token, the two URLs, the model's key and ``REDIS_URL``
set; no warm-up) or one ``python -m bench.floor_bot``. ``--warmup N`` adds the
bot after N customers as a side of its own, ``--baseline DIR`` another tree's bot.

Each round takes every burst once per side, the order turned every round, each
side against fresh servers. Per side and burst it reports the time
from the burst's push to the last customer's first answer, the CPU of the bot
processes during it (``/proc``), and the commands Redis ran per customer
(``INFO commandstats`` deltas: the commands inside scripts included, as the
issue counted them; read once the last answers' bookkeeping is done). The summary
gives, per burst, the median over rounds of each, the spread (lowest and highest),
and the per-round ratios.

    .venv/bin/python -m bench.burst --rounds 5                 # 300:1 and 1000:2
    .venv/bin/python -m bench.burst --bursts 1000:2 --rounds 7 --bot-env STREAMING=off
    # Before and after in one run: an older commit's bot as a third side.
    git archive b52f430 | (mkdir -p /tmp/before && tar -x -C /tmp/before)
    .venv/bin/python -m bench.burst --rounds 5 --baseline /tmp/before
"""

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from bench.durability import READY, start_floor_bot, start_process, start_py_spy, stop
from bench.model_script import ANSWER
from bench.stack import ChildServer, ModelServerProcess, process_cpu_seconds
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import TEST_TOKEN

RESULTS = Path(__file__).with_name("results") / "burst.json"
_PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL")
_ROOT = str(Path(__file__).resolve().parent.parent)
_FIRST_CUSTOMER = 700_000
_WARMUP_CUSTOMER = 600_000
_RUN_TIMEOUT_SECONDS = 300.0
_START_SECONDS = 600.0
_IDLE_COMMANDS = 10


class FakeBotApiProcess(ChildServer):
    """``python -m bench.telegram_server``: the fake Bot API with its load generator."""

    def __init__(self) -> None:
        super().__init__("bench.telegram_server", "--token", TEST_TOKEN, urls=2)


def default_env(
    redis_url: str, telegram_url: str, model_url: str, root: str = _ROOT
) -> dict[str, str]:
    """What an outsider sets to start the bot against the fakes, and nothing more.

    ``bench.durability`` sets more (``FLOOD_BURST``, a key prefix, ``HEALTH_PORT=0``).
    """
    env = {key: os.environ[key] for key in _PASSED_THROUGH if key in os.environ}
    env.update(
        PYTHONPATH=root,
        TELEGRAM_BOT_TOKEN=TEST_TOKEN,
        TELEGRAM_API_BASE_URL=telegram_url,
        OPENAI_API_KEY="sk-bench",
        OPENAI_BASE_URL=model_url,
        REDIS_URL=redis_url,
    )
    return env


async def _run_load(
    http: aiohttp.ClientSession, control_url: str, count: int, first_chat: int
) -> dict[str, Any]:
    """Push ``count`` first messages at once; the fake answers once each has a reply."""
    plan = {
        "turns": count,
        "concurrency": count,
        "text": "вопрос покупателя",
        "expected_reply": ANSWER,
        "first_chat": first_chat,
        "timeout_seconds": _RUN_TIMEOUT_SECONDS,
    }
    async with http.post(f"{control_url}/run", json=plan) as response:
        response.raise_for_status()
        report: dict[str, Any] = await response.json()
    return report


async def _commands(redis_url: str, *, reset: bool) -> tuple[dict[str, int], float]:
    """Commands Redis ran since the last reset, by name (``INFO commandstats``), and its CPU.

    Reset afterwards if asked.
    """
    redis = aioredis.Redis.from_url(redis_url)
    try:
        stats = await redis.info("commandstats")
        cpu = await redis.info("cpu")
        calls = {
            name.removeprefix("cmdstat_"): int(entry["calls"]) for name, entry in stats.items()
        }
        if reset:
            await redis.config_resetstat()
        return calls, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
    finally:
        await redis.aclose()


async def one_burst(
    count: int,
    processes: int,
    *,
    side: str,
    latency: float,
    warmup: int,
    bot_env: dict[str, str],
    baseline: Path | None = None,
    profile: Path | None = None,
) -> dict[str, Any]:
    """One side takes one burst against fresh servers; what it cost.

    ``side``: ``bot``, ``floor_bot``, ``baseline`` (the bot of the source tree
    ``baseline``, with this checkout's packages), or ``bot_warmed`` (the bot after
    ``warmup`` customers, where the other sides take none). ``profile``: py-spy
    records each bot process's burst there (collapsed stacks).
    """
    floor = side == "floor_bot"
    warmup = warmup if side == "bot_warmed" else 0
    root = str(baseline) if side == "baseline" and baseline is not None else _ROOT
    redis_server = RedisServer()
    redis_server.start()
    bots: list[asyncio.subprocess.Process] = []
    try:
        with (
            FakeBotApiProcess() as telegram,
            ModelServerProcess(latency) as model,
            tempfile.TemporaryDirectory() as tmp,
        ):
            # The control calls wait for the whole burst: no client timeout.
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as http:
                url = redis_server.url
                if floor:
                    bots = [
                        await start_floor_bot(
                            url, telegram.base_url, model.base_url, Path(tmp), within=_START_SECONDS
                        )
                    ]
                else:
                    env = {**default_env(url, telegram.base_url, model.base_url, root), **bot_env}
                    modes = ["polling"] + ["worker"] * (processes - 1)
                    started = await asyncio.gather(
                        *(
                            start_process(
                                ["-m", "bot", mode],
                                env,
                                Path(tmp) / f"{mode}-{n}",
                                mode,
                                READY[mode],
                                # A loaded host (other work on the two cores) starts slowly.
                                within=_START_SECONDS,
                            )
                            for n, mode in enumerate(modes)
                        ),
                        return_exceptions=True,
                    )
                    bots = [bot for bot in started if not isinstance(bot, BaseException)]
                    for failed in started:
                        if isinstance(failed, BaseException):
                            raise failed
                if warmup:
                    await _run_load(http, telegram.control_url, warmup, _WARMUP_CUSTOMER)
                name = f"{count}-{side}-{int(time.time())}"
                spies = [] if profile is None else await start_py_spy(bots, profile, name)
                _, redis_before = await _commands(url, reset=True)
                cpu_before = [process_cpu_seconds(bot.pid) for bot in bots]
                model_before = model.cpu_seconds()
                report = await _run_load(http, telegram.control_url, count, _FIRST_CUSTOMER)
                cpu = [
                    process_cpu_seconds(bot.pid) - b
                    for bot, b in zip(bots, cpu_before, strict=True)
                ]
                model_cpu = model.cpu_seconds() - model_before
                # The last answers' bookkeeping (delivered, released) runs after them: the
                # commands are counted once Redis has had none for a while.
                commands, redis_after = await _settled_commands(url)
                for spy in spies:
                    spy.send_signal(signal.SIGINT)
                    await spy.wait()
    finally:
        for bot in bots:
            await stop(bot)
        redis_server.close()
    replied = [at for at in report["replied"] if at is not None]
    pushed = min(at for at in report["pushed"] if at is not None)
    return {
        "side": side,
        "customers": count,
        "processes": 1 if floor else processes,
        "answered": len(replied),
        "unexpected_replies": report["unexpected_replies"],
        "all_answered_seconds": round(max(replied) - pushed, 3),
        "p50_answer_seconds": round(statistics.median(replied) - pushed, 3),
        # Until the last customer's answer (drafts and actions before it included).
        "cpu_ms_per_customer": round(sum(cpu) * 1000 / count, 3),
        "cpu_ms_per_customer_by_process": [round(c * 1000 / count, 3) for c in cpu],
        "redis_commands_per_customer": round(sum(commands.values()) / count, 2),
        "redis_commands_by_name_per_customer": {
            name: round(calls / count, 2)
            for name, calls in sorted(commands.items(), key=lambda item: -item[1])
        },
        "model_server_cpu_ms_per_customer": round(model_cpu * 1000 / count, 3),
        "redis_server_cpu_ms_per_customer": round((redis_after - redis_before) * 1000 / count, 3),
        "fake_bot_api_cpu_ms_per_customer": round(report["fake_cpu_seconds"] * 1000 / count, 3),
        "bot_api_calls_per_customer": {
            method: round(calls / count, 2) for method, calls in sorted(report["api_calls"].items())
        },
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


async def _settled_commands(redis_url: str) -> tuple[dict[str, int], float]:
    """:func:`_commands` once two reads 0.5 s apart differ by no more than idle polling.

    At most 15 s. The bots' idle loops (a blocking read a second per process,
    ``INFO`` itself) add a few commands a second, not one a customer.
    """
    commands, cpu = await _commands(redis_url, reset=False)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        later, cpu = await _commands(redis_url, reset=False)
        settled = sum(later.values()) - sum(commands.values()) <= _IDLE_COMMANDS
        commands = later
        if settled:
            break
    return commands, cpu


def _spread(values: list[float]) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), 3),
        "low": round(min(values), 3),
        "high": round(max(values), 3),
        "rounds": [round(v, 3) for v in values],
    }


def summarise(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """Per burst: each measure's median and spread per side, and each side's ratio per round.

    A ratio is taken within a round (the sides ran minutes apart, the host alike):
    ``<side>_over_floor_bot``, and ``bot_over_baseline`` when a baseline ran.
    """
    summary: dict[str, Any] = {}
    for key, sides in runs.items():
        entry: dict[str, Any] = {}
        for measure in (
            "all_answered_seconds",
            "cpu_ms_per_customer",
            "redis_commands_per_customer",
        ):
            values = {side: [r[measure] for r in results] for side, results in sides.items()}
            entry[measure] = {side: _spread(v) for side, v in values.items()}
            pairs = [(side, "floor_bot") for side in values if side != "floor_bot"]
            pairs += [("bot", other) for other in ("baseline", "bot_warmed") if other in values]
            for top, bottom in pairs:
                entry[measure][f"{top}_over_{bottom}"] = _spread(
                    [t / b for t, b in zip(values[top], values[bottom], strict=True)]
                )
        summary[key] = entry
    return summary


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    """Every round: each burst on every side, the order turned every round."""
    bursts = [(int(c), int(p)) for c, p in (b.split(":") for b in args.bursts)]
    bot_env = dict(pair.split("=", 1) for pair in args.bot_env)
    sides = ["bot", "floor_bot"] + (["baseline"] if args.baseline else [])
    if args.warmup:
        sides.append("bot_warmed")
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        f"{c}_customers_{p}_process": {side: [] for side in sides} for c, p in bursts
    }
    for round_ in range(args.rounds):
        for count, processes in bursts:
            key = f"{count}_customers_{processes}_process"
            shift = round_ % len(sides)
            order = sides[shift:] + sides[:shift]
            if round_ % 2:
                order.reverse()
            for side in order:
                result = await one_burst(
                    count,
                    processes,
                    side=side,
                    latency=args.latency,
                    warmup=args.warmup,
                    bot_env=bot_env,
                    baseline=args.baseline,
                    profile=args.profile,
                )
                runs[key][side].append(result)
                print(
                    f"round {round_ + 1}/{args.rounds} {key} {side}: "
                    f"{result['all_answered_seconds']} s, CPU {result['cpu_ms_per_customer']} ms "
                    f"{result['cpu_ms_per_customer_by_process']}, Redis "
                    f"{result['redis_commands_per_customer']} commands a customer "
                    f"(load {result['loadavg_1m']})",
                    file=sys.stderr,
                    flush=True,
                )
    return {
        "settings": {
            "latency_seconds": args.latency,
            "warmup_customers": args.warmup,
            "bot_env": bot_env,
            "baseline": str(args.baseline) if args.baseline else None,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        },
        "summary": summarise(runs),
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bursts", nargs="+", default=["300:1", "1000:2"], help="CUSTOMERS:BOT_PROCESSES"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=float, default=1.0, help="model seconds a request")
    parser.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="adds a side: the bot after this many customers were answered (as bench.durability)",
    )
    parser.add_argument(
        "--bot-env", nargs="*", default=[], metavar="NAME=VALUE", help="more bot settings"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a source tree of the bot (e.g. `git archive` of an older commit) as a third side",
    )
    parser.add_argument(
        "--profile", type=Path, default=None, help="py-spy each bot process's burst into here"
    )
    args = parser.parse_args(argv)
    results = asyncio.run(main_async(args))
    print(json.dumps(results["summary"], indent=1), flush=True)
    args.output.parent.mkdir(exist_ok=True)
    args.output.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
