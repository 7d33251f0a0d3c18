"""``python -m bench.durability``: Redis round trips of a queued turn, and 1,000 customers.

Real ``python -m bot`` processes against a private redis-server, the fake Bot
API (in this process) and the scripted model (:mod:`bench.model_script`).

* ``round_trips``: one polling process; ``--turns`` sequential two-tool turns
  (one customer writes, waits for the answer, reads 0.3 s, writes again), 20 warm-up turns
  first. The commands each client sent are counted with ``MONITOR`` (commands a
  script runs inside Redis are told apart and not counted as round trips), and
  ``INFO commandstats`` deltas (``CONFIG RESETSTAT`` first) are reported next to
  them; both include the workers' idle polls (``XREADGROUP`` returning nothing
  after its 1 s block, ``XAUTOCLAIM`` every lease/3) during the run.
* ``customers``: ``--customers`` first messages pushed at once, model latency
  1 s (a child process), after ``--warmup`` other customers were answered (none
  by default), time until every customer has an answer: one
  ``polling`` process, then one ``polling`` plus one ``worker`` process.
  ``WORKER_CONCURRENCY`` is unset (as many as ``LLM_MAX_CONNECTIONS``) unless
  ``--concurrency`` is given.
* ``customers_vs_floor``: each of ``--bursts`` (customers:bot processes, by default
  300 with one process and 1,000 with poller + worker) taken by the bots and by one
  :mod:`bench.floor_bot` process in turn, ``--runs`` times, the order reversed every
  run; the bot's time to all answered over the floor bot's. ``--bot-env`` passes
  settings to the bots, ``--profile DIR`` records each bot process with py-spy.
"""

import argparse
import asyncio
import gc
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from bench import floor_bot
from bench.model_script import TWO_TOOLS, bench_responder
from bench.stack import ModelServerProcess, peak_rss_bytes, process_cpu_seconds
from bot.settings import LLMSettings
from bot.telegram.webhook import SECRET_HEADER
from bot.testing.openai_server import ScriptedOpenAIServer
from bot.testing.redis_server import RedisServer, free_port
from bot.testing.telegram_server import TEST_TOKEN, FakeTelegramServer

RESULTS = Path(__file__).with_name("results") / "durability.json"
_PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH")
READY = {
    "polling": "starting (polling)",
    "worker": "Worker running",
    "webhook": "Webhook listening on",
}
_HOOK_PATH = "/tg"
_HOOK_SECRET = "bench-secret"  # noqa: S105 - the benchmark's own webhook, on loopback
_TURN_CPU_WARMUP = 20
_TURN_CPU_CUSTOMERS = 5
_ROUND_TRIP_WARMUP = 20
_READING_SECONDS = 0.3
_ROOT = str(Path(__file__).resolve().parent.parent)


async def start_bot(
    mode: str, redis_url: str, telegram_url: str, model_url: str, workdir: Path, **extra: str
) -> asyncio.subprocess.Process:
    """``python -m bot <mode>`` with a clean environment; returns once it takes work."""
    env = {key: os.environ[key] for key in _PASSED_THROUGH if key in os.environ}
    env["PYTHONPATH"] = _ROOT
    env.update(
        TELEGRAM_BOT_TOKEN=TEST_TOKEN,
        TELEGRAM_API_BASE_URL=telegram_url,
        LLM_BACKEND="openai",
        OPENAI_API_KEY="sk-bench",
        OPENAI_BASE_URL=model_url,
        LLM_MODEL="scripted-model",
        REDIS_URL=redis_url,
        REDIS_KEY_PREFIX="bench",
        AUDIT_STREAM="bench:audit",
        FLOOD_BURST="1000",
        LOG_LEVEL="INFO",
        HEALTH_PORT="0",
        **extra,
    )
    return await start_process(["-m", "bot", mode], env, workdir, mode, READY[mode])


async def start_floor_bot(
    redis_url: str, telegram_url: str, model_url: str, workdir: Path, *, within: float = 120
) -> asyncio.subprocess.Process:
    """``python -m bench.floor_bot`` against the same servers; returns once it polls."""
    env = {key: os.environ[key] for key in _PASSED_THROUGH if key in os.environ}
    env["PYTHONPATH"] = _ROOT
    arguments = ["--telegram", telegram_url, "--token", TEST_TOKEN, "--model", model_url]
    return await start_process(
        ["-m", "bench.floor_bot", *arguments, "--redis", redis_url],
        env,
        workdir,
        "floor_bot",
        floor_bot.READY,
        within=within,
    )


async def start_process(
    arguments: list[str],
    env: dict[str, str],
    workdir: Path,
    name: str,
    ready: str,
    *,
    within: float = 120,
) -> asyncio.subprocess.Process:
    """``python <arguments>``, stderr in ``<name>.log``; returns once it logs ``ready``.

    Raises ``RuntimeError`` (the process killed) when it exits or is not ready ``within``.
    """
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    log_path = workdir / f"{name}.log"
    log = log_path.open("wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable, *arguments, cwd=workdir, env=env, stderr=log
    )
    deadline = time.monotonic() + within
    while ready not in log_path.read_text(errors="replace"):
        if process.returncode is not None or time.monotonic() > deadline:
            await stop(process)
            raise RuntimeError(f"{name} did not start: {log_path.read_text()}")
        await asyncio.sleep(0.1)
    return process


async def stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM and wait."""
    if process.returncode is None:
        process.terminate()
        with suppress(TimeoutError):
            async with asyncio.timeout(30):
                await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


async def round_trips(turns: int) -> dict[str, Any]:
    """Top-level Redis commands (round trips) per two-tool turn, and commandstats per turn."""
    redis_server = RedisServer()
    redis_server.start()
    telegram = FakeTelegramServer()
    await telegram.start()
    redis = aioredis.Redis.from_url(redis_server.url)
    try:
        async with ScriptedOpenAIServer() as model:
            model.responder = bench_responder
            with tempfile.TemporaryDirectory() as tmp:
                bot = await start_bot(
                    "polling", redis_server.url, telegram.base_url, model.base_url, Path(tmp)
                )
                try:
                    chat = 900_001
                    sent = 0

                    async def turn(n: int) -> None:
                        nonlocal sent
                        await telegram.push_message(chat, f"{TWO_TOOLS} вопрос {n}")
                        sent += 1
                        await telegram.wait_for_texts(chat, sent, within=30)
                        # A customer reads before writing again: the drain ends, the lease
                        # is released, the next message is a fresh signal (the usual case).
                        await asyncio.sleep(_READING_SECONDS)

                    for n in range(_ROUND_TRIP_WARMUP):
                        await turn(n)
                    await redis.config_resetstat()
                    commands: Counter[str] = Counter()
                    inside_scripts: Counter[str] = Counter()
                    started = time.monotonic()
                    async with redis.monitor() as monitor:
                        listening = asyncio.create_task(_listen(monitor, commands, inside_scripts))
                        for n in range(turns):
                            await turn(_ROUND_TRIP_WARMUP + n)
                        # Let the last turn's tail (delivery mark, acknowledgement) arrive.
                        await asyncio.sleep(0.5)
                        listening.cancel()
                        with suppress(asyncio.CancelledError):
                            await listening
                    elapsed = time.monotonic() - started
                    stats = await redis.info("commandstats")
                finally:
                    await stop(bot)
        model_requests = len(model.requests)
    finally:
        await redis.aclose()
        await telegram.close()
        redis_server.close()
    top = {name: count / turns for name, count in sorted(commands.items())}
    idle = {"measured_seconds": round(elapsed, 2), "reading_pause_seconds": _READING_SECONDS}
    return {
        "turns": turns,
        "model_requests_per_turn": model_requests / (turns + _ROUND_TRIP_WARMUP),
        "round_trips_per_turn": sum(commands.values()) / turns,
        "round_trips_by_command": top,
        "inside_scripts_per_turn": {k: v / turns for k, v in sorted(inside_scripts.items())},
        "commandstats_calls_per_turn": {
            name.removeprefix("cmdstat_"): round(int(value["calls"]) / turns, 2)
            for name, value in sorted(stats.items())
            if isinstance(value, dict) and name not in ("cmdstat_config", "cmdstat_monitor")
        },
        "idle": idle,
    }


async def _listen(monitor: Any, commands: Counter[str], inside: Counter[str]) -> None:
    async for event in monitor.listen():
        command = str(event.get("command", "")).split(" ", 1)[0].upper()
        if command in {"MONITOR", "INFO", "CONFIG"}:
            continue
        if event.get("client_type") == "lua":
            inside[command] += 1
        else:
            commands[command] += 1


async def turn_cpu(turns: int) -> dict[str, Any]:
    """Bot CPU per two-tool turn of a real process, in polling and in webhook mode.

    One process at a time; ``turns`` sequential two-tool questions from
    :data:`_TURN_CPU_CUSTOMERS` customers in turn, after :data:`_TURN_CPU_WARMUP`
    warm-up turns. CPU is the process's own (``/proc``); the fake Bot API and the
    scripted model run in this process. Webhook mode is what production runs: each
    update arrives as a POST instead of in a ``getUpdates`` answer.
    """
    return {mode: await _turn_cpu_in(mode, turns) for mode in ("polling", "webhook")}


async def _turn_cpu_in(mode: str, turns: int) -> dict[str, Any]:
    redis_server = RedisServer()
    redis_server.start()
    telegram = FakeTelegramServer()
    await telegram.start()
    port = free_port()
    hook = f"http://127.0.0.1:{port}{_HOOK_PATH}"
    extra = {
        "WEBHOOK_URL": "https://bot.example.com",
        "WEBHOOK_PATH": _HOOK_PATH,
        "WEBHOOK_SECRET": _HOOK_SECRET,
        "WEBHOOK_HOST": "127.0.0.1",
        "WEBHOOK_PORT": str(port),
    }
    sent: Counter[int] = Counter()
    try:
        async with ScriptedOpenAIServer() as model, aiohttp.ClientSession() as http:
            model.responder = bench_responder

            async def turn(n: int) -> None:
                chat = 800_000 + n % _TURN_CPU_CUSTOMERS
                update = telegram.message_update(chat, f"{TWO_TOOLS} вопрос {n}")
                if mode == "webhook":
                    headers = {SECRET_HEADER: _HOOK_SECRET}
                    async with http.post(hook, json=update, headers=headers) as response:
                        response.raise_for_status()
                else:
                    await telegram.push(update)
                sent[chat] += 1
                await telegram.wait_for_texts(chat, sent[chat], within=30)

            with tempfile.TemporaryDirectory() as tmp:
                bot = await start_bot(
                    mode,
                    redis_server.url,
                    telegram.base_url,
                    model.base_url,
                    Path(tmp),
                    **(extra if mode == "webhook" else {}),
                )
                try:
                    for n in range(_TURN_CPU_WARMUP):
                        await turn(n)
                    cpu_before = process_cpu_seconds(bot.pid)
                    started = time.monotonic()
                    for n in range(turns):
                        await turn(_TURN_CPU_WARMUP + n)
                    elapsed = time.monotonic() - started
                    cpu = process_cpu_seconds(bot.pid) - cpu_before
                finally:
                    await stop(bot)
    finally:
        await telegram.close()
        redis_server.close()
    return {
        "turns": turns,
        "bot_cpu_ms_per_turn": round(cpu * 1000 / turns, 2),
        "wall_ms_per_turn": round(elapsed * 1000 / turns, 2),
    }


async def customers(
    count: int,
    processes: int,
    concurrency: int | None,
    warmup: int,
    *,
    floor: bool = False,
    bot_env: dict[str, str] | None = None,
    profile: Path | None = None,
) -> dict[str, Any]:
    """Seconds until ``count`` customers, all writing at once, have their answer.

    ``warmup`` other customers are answered first (as the Bot API scenarios do), so the
    burst meets running processes rather than ones still making their first connections.
    ``floor``: one :mod:`bench.floor_bot` process answers instead of ``processes`` bots;
    ``bot_env``: more settings for the bots (``STREAMING=off``); ``profile``: a
    directory where py-spy records each bot process during the burst (collapsed stacks).
    """
    redis_server = RedisServer()
    redis_server.start()
    telegram = FakeTelegramServer()
    await telegram.start()
    extra = {"WORKER_CONCURRENCY": str(concurrency)} if concurrency else {}
    extra.update(bot_env or {})
    bots: list[asyncio.subprocess.Process] = []
    try:
        with ModelServerProcess(1.0) as model, tempfile.TemporaryDirectory() as tmp:
            url = redis_server.url
            modes = ["polling"] + ["worker"] * (processes - 1)
            if floor:
                bots = [await start_floor_bot(url, telegram.base_url, model.base_url, Path(tmp))]
            else:
                bots = list(
                    await asyncio.gather(
                        *(
                            start_bot(
                                mode,
                                url,
                                telegram.base_url,
                                model.base_url,
                                Path(tmp) / f"{mode}-{n}",
                                **extra,
                            )
                            for n, mode in enumerate(modes)
                        )
                    )
                )
            await telegram.push(
                *(telegram.message_update(600_000 + n, "разминка") for n in range(warmup))
            )
            await telegram.wait_for(lambda: telegram.accepted("sendMessage") >= warmup, within=120)
            updates = [
                telegram.message_update(700_000 + n, f"вопрос покупателя {n}") for n in range(count)
            ]
            name = f"{count}-{'floor_bot' if floor else 'bot'}-{int(time.time())}"
            spies = [] if profile is None else await start_py_spy(bots, profile, name)
            cpu_before = await _cpu_by_process(bots, model, url)
            # This process serves the fake Bot API: a pause of its collector (the heap of
            # recorded calls grows with every burst) would stall both sides' calls.
            gc.collect()
            gc.disable()
            try:
                started = time.monotonic()
                await telegram.push(*updates)
                await telegram.wait_for(
                    lambda: telegram.accepted("sendMessage") >= warmup + count, within=600
                )
                elapsed = time.monotonic() - started
            finally:
                gc.enable()
            cpu_after = await _cpu_by_process(bots, model, url)
            peak_rss = {f"bot_{n}": peak_rss_bytes(bot.pid) >> 20 for n, bot in enumerate(bots)}
            for spy in spies:
                spy.send_signal(signal.SIGINT)
                await spy.wait()
            methods = Counter(call.method for call in telegram.calls if call.at >= started)
            # Requests the model answered before the burst were fetched with the CPU above.
            model_starts = [span[0] for span in await _model_spans(model) if span[0] >= started]
            replies = sorted(
                call.at - started
                for call in telegram.calls_of("sendMessage")
                if call.ok and call.at >= started
            )
    finally:
        for bot in bots:
            await stop(bot)
        await telegram.close()
        redis_server.close()
    return {
        "customers": count,
        "warmup_customers": warmup,
        "side": "floor_bot" if floor else "bot",
        "bot_env": {} if floor else bot_env or {},
        "processes": 1 if floor else processes,
        "worker_concurrency": (
            # Unset, WORKER_CONCURRENCY follows LLM_MAX_CONNECTIONS (the bench leaves it so).
            None if floor else concurrency or LLMSettings.model_fields["max_connections"].default
        ),
        "all_answered_seconds": round(elapsed, 2),
        "p50_reply_seconds": round(replies[len(replies) // 2], 2),
        "p99_reply_seconds": round(replies[int(len(replies) * 0.99) - 1], 2),
        "bot_api_calls_per_customer": {
            method: round(calls / count, 2) for method, calls in sorted(methods.items())
        },
        # When the model's requests began and the answers went, per quarter second from
        # the burst's start: a burst taken in whole starts every request in its first
        # second; waves show where intake or the workers held customers back.
        "timeline_per_quarter_second": {
            "model_requests_started": _per_quarter(model_starts, started, elapsed),
            "sendMessage": _per_quarter(
                [call.at for call in telegram.calls_of("sendMessage") if call.at >= started],
                started,
                elapsed,
            ),
            # A batch is confirmed by the next ``getUpdates``: how fast intake took the burst.
            "getUpdates": _per_quarter(
                [call.at for call in telegram.calls_of("getUpdates") if call.at >= started],
                started,
                elapsed,
            ),
        },
        # The most memory each bot process held, warm-up and burst included (MiB).
        "peak_rss_mib": peak_rss,
        # CPU each process used during the burst, per customer (ms): where the cores went.
        "cpu_ms_per_customer": {
            name: round((cpu_after[name] - cpu_before[name]) * 1000 / count, 2)
            for name in cpu_after
        },
    }


async def customers_vs_floor(
    bursts: list[tuple[int, int]],
    runs: int,
    concurrency: int | None,
    warmup: int,
    *,
    bot_env: dict[str, str] | None = None,
    profile: Path | None = None,
) -> dict[str, Any]:
    """Each burst (customers, bot processes) against one floor bot, alternating.

    Per run and burst, the bot and the floor bot take the same burst one after the
    other (fresh redis-server, fake Bot API and model server each time), the order
    reversed every run so that a busy neighbour weighs on both. ``ratio`` is the
    median bot time to all answered over the median floor bot's.
    """
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {
        f"{count}_customers_{processes}_process": {"bot": [], "floor_bot": []}
        for count, processes in bursts
    }
    for run in range(runs):
        for count, processes in bursts:
            key = f"{count}_customers_{processes}_process"
            order = ["bot", "floor_bot"] if run % 2 == 0 else ["floor_bot", "bot"]
            for side in order:
                load = os.getloadavg()[0]
                result = await customers(
                    count,
                    processes,
                    concurrency,
                    warmup,
                    floor=side == "floor_bot",
                    bot_env=bot_env,
                    profile=profile,
                )
                result["loadavg_1m_start_end"] = [round(load, 2), round(os.getloadavg()[0], 2)]
                raw[key][side].append(result)
                print(
                    f"run {run + 1}/{runs} {key} {side}: all answered after "
                    f"{result['all_answered_seconds']} s (load {result['loadavg_1m_start_end']})",
                    file=sys.stderr,
                    flush=True,
                )
    summary: dict[str, Any] = {}
    for key, sides in raw.items():
        times = {side: [r["all_answered_seconds"] for r in runs_] for side, runs_ in sides.items()}
        medians = {side: statistics.median(values) for side, values in times.items()}
        summary[key] = {
            "bot_all_answered_seconds": times["bot"],
            "floor_bot_all_answered_seconds": times["floor_bot"],
            "median_bot_seconds": medians["bot"],
            "median_floor_bot_seconds": medians["floor_bot"],
            "ratio_bot_over_floor": round(medians["bot"] / medians["floor_bot"], 2),
            "ratio_per_run": [
                round(b / f, 2) for b, f in zip(times["bot"], times["floor_bot"], strict=True)
            ],
        }
    return {"summary": summary, "runs": raw}


async def _model_spans(model: ModelServerProcess) -> list[tuple[float, float]]:
    """The model server's request spans since it was last asked (``GET /timings``)."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{model.control_url}/timings") as response,
    ):
        body = await response.json()
    return [(float(start), float(end)) for start, end in body["intervals"]]


def _per_quarter(times: list[float], started: float, elapsed: float) -> list[int]:
    """How many of ``times`` fell in each quarter second from ``started`` to the end."""
    counts = [0] * (int(elapsed * 4) + 1)
    for at in times:
        counts[min(int((at - started) * 4), len(counts) - 1)] += 1
    return counts


async def start_py_spy(
    bots: list[asyncio.subprocess.Process], directory: Path, name: str
) -> list[asyncio.subprocess.Process]:
    """``py-spy record`` (``PY_SPY``, else on ``PATH``) on each bot, collapsed stacks."""
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    spies = [
        await asyncio.create_subprocess_exec(
            os.environ.get("PY_SPY", "py-spy"),
            "record",
            "--pid",
            str(bot.pid),
            "--rate",
            "250",
            "--format",
            "raw",
            "--nonblocking",
            "--output",
            str(directory / f"{name}-{n}.txt"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for n, bot in enumerate(bots)
    ]
    await asyncio.sleep(1.0)  # attached before the burst
    return spies


async def _cpu_by_process(
    bots: list[asyncio.subprocess.Process], model: ModelServerProcess, redis_url: str
) -> dict[str, float]:
    """CPU seconds used so far by each bot, the model server, redis-server and this process.

    This process runs the fake Bot API (and nothing else during the burst).
    """
    redis = aioredis.Redis.from_url(redis_url)
    try:
        info = await redis.info("cpu")
    finally:
        await redis.aclose()
    cpu = {f"bot_{n}": process_cpu_seconds(bot.pid) for n, bot in enumerate(bots)}
    cpu["model_server"] = model.cpu_seconds()
    cpu["redis_server"] = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    cpu["fake_telegram"] = time.process_time()
    return cpu


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    """Run the chosen scenarios."""
    results: dict[str, Any] = {}
    bot_env = dict(pair.split("=", 1) for pair in args.bot_env)
    if "round_trips" in args.only:
        results["round_trips"] = await round_trips(args.turns)
        print(json.dumps(results["round_trips"], ensure_ascii=False, indent=1), flush=True)
    if "turn_cpu" in args.only:
        results["turn_cpu"] = await turn_cpu(args.turns)
        print(json.dumps(results["turn_cpu"], indent=1), flush=True)
    if "customers_vs_floor" in args.only:
        bursts = [(int(c), int(p)) for c, p in (b.split(":") for b in args.bursts)]
        results["customers_vs_floor"] = await customers_vs_floor(
            bursts,
            args.runs,
            args.concurrency,
            args.warmup,
            bot_env=bot_env,
            profile=args.profile,
        )
        print(json.dumps(results["customers_vs_floor"]["summary"], indent=1), flush=True)
    if "customers" in args.only:
        for processes in (1, 2):
            key = f"customers_{processes}_process"
            results[key] = await customers(
                args.customers, processes, args.concurrency, args.warmup, bot_env=bot_env
            )
            print(json.dumps(results[key], indent=1), flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--customers", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=0, help="customers answered first")
    parser.add_argument(
        "--bursts",
        nargs="+",
        default=["300:1", "1000:2"],
        help="customers_vs_floor: CUSTOMERS:BOT_PROCESSES per burst",
    )
    parser.add_argument("--runs", type=int, default=3, help="customers_vs_floor: runs per side")
    parser.add_argument(
        "--bot-env",
        nargs="*",
        default=[],
        metavar="NAME=VALUE",
        help="customers, customers_vs_floor: settings for the bot processes (e.g. STREAMING=off)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help="where the results go (JSON)")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="customers_vs_floor: py-spy records each bot process's burst into this directory",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=["round_trips", "turn_cpu", "customers"],
        choices=["round_trips", "turn_cpu", "customers", "customers_vs_floor"],
    )
    args = parser.parse_args(argv)
    results = asyncio.run(main_async(args))
    args.output.parent.mkdir(exist_ok=True)
    args.output.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
