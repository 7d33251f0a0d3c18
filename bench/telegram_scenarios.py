"""Telegram-level scenarios: the whole bot, from an update in the Bot API to the reply sent.

Every scenario runs three processes besides redis-server: the bot (this
process, see :class:`bench.telegram_stack.RunningBot`), the fake Bot API with the
load generator, and the scripted model. Customers are distinct users unless a
scenario says otherwise; flood control and de-duplication run as in production.
"""

from typing import Any

from bench.model_script import ANSWER, TWO_TOOLS
from bench.scenarios import QUESTION, TURNS_PER_CONVERSATION
from bench.stack import ModelServerProcess, RedisStats
from bench.stats import latency_summary_ms, percentile
from bench.telegram_server import LoadPlan
from bench.telegram_stack import (
    LoadClient,
    LoadReport,
    RunningBot,
    TelegramServerProcess,
    telegram_bench_settings,
)

MEASURED_CHATS = 1_000_000
"""Chat ids of measured turns start here; warm-up chats start at 1."""

SEQUENTIAL_GAP_SECONDS = 0.01
"""Pause after a reply before the next message, so that a turn's tail (the
``sendMessage`` response, the typing indicator's task) does not overlap the
next turn; the tail's CPU still shows in ``bot_cpu_ms_per_turn``."""


def _cpu(
    bot_cpu: float, telegram: TelegramServerProcess, model: ModelServerProcess
) -> tuple[float, float, float]:
    return bot_cpu, telegram.cpu_seconds(), model.cpu_seconds()


def _utilisation(
    before: tuple[float, float, float],
    after: tuple[float, float, float],
    seconds: float,
    fake_cpu: float,
) -> dict[str, float]:
    """Share of one core each process used over the run (1.0 = a whole core)."""
    if seconds <= 0:
        return {}
    bot, telegram, model = (a - b for a, b in zip(after, before, strict=True))
    return {
        "bot": round(bot / seconds, 2),
        "fake_telegram": round(max(telegram, fake_cpu) / seconds, 2),
        "model_server": round(model / seconds, 2),
    }


def _failures(report: LoadReport) -> dict[str, int]:
    return {"missing_replies": report.missing, "unexpected_replies": report.unexpected_replies}


async def overhead(redis_url: str, *, turns: int, two_tools: bool) -> dict[str, Any]:
    """Sequential turns: update queued -> reply received by the Bot API, minus the model's time.

    Five turns per customer (some history), 50 warm-up turns. Redis is counted
    over the measured turns: de-duplication, flood control, lease, load, save
    and audit.
    """
    text = f"{QUESTION} {TWO_TOOLS}" if two_tools else QUESTION
    stats = RedisStats(redis_url)

    def plan(count: int, first_chat: int) -> LoadPlan:
        return LoadPlan(
            turns=count,
            concurrency=1,
            text=text,
            expected_reply=ANSWER,
            turns_per_chat=TURNS_PER_CONVERSATION,
            first_chat=first_chat,
            gap_seconds=SEQUENTIAL_GAP_SECONDS,
        )

    with ModelServerProcess(0.0) as model, TelegramServerProcess() as telegram:
        settings = telegram_bench_settings(redis_url, model.base_url, telegram.base_url)
        try:
            async with RunningBot(settings) as bot, LoadClient(telegram, model) as load:
                await load.run(plan(50, 1))  # warm-up
                await stats.reset()
                trips, commands = bot.counters.round_trips, bot.counters.commands
                report = await load.run(plan(turns, MEASURED_CHATS))
                bot_cpu = report.bot_cpu_seconds
                round_trips = bot.counters.round_trips - trips
                top_level = bot.counters.commands - commands
                per_turn = {
                    name: round(count / turns, 2)
                    for name, count in (await stats.commands()).items()
                }
        finally:
            await stats.flush()
            await stats.aclose()
    pairs = report.turn_seconds()
    return {
        "turns": turns,
        **_failures(report),
        "model_requests_per_turn": round(len(report.model_intervals) / turns, 2),
        "bot_overhead": latency_summary_ms([wall - model for wall, model in pairs]),
        "update_to_reply": latency_summary_ms([wall for wall, _ in pairs]),
        "model_ms_per_turn": round(sum(m for _, m in pairs) / max(len(pairs), 1) * 1000, 3),
        "bot_cpu_ms_per_turn": round(bot_cpu / turns * 1000, 3),
        "fake_telegram_cpu_ms_per_turn": round(report.fake_cpu_seconds / turns * 1000, 3),
        "bot_api_calls_per_turn": {
            name: round(count / turns, 2) for name, count in sorted(report.api_calls.items())
        },
        "redis": {
            "round_trips_per_turn": round(round_trips / turns, 2),
            "top_level_commands_per_turn": round(top_level / turns, 2),
            "server_commands_per_turn": round(sum(per_turn.values()), 2),
            "scripts_per_turn": round(per_turn.get("evalsha", 0) + per_turn.get("eval", 0), 2),
            "server_commands_by_name": per_turn,
        },
    }


async def _load(
    redis_url: str, *, latency: float, warmup: tuple[int, int], measured: tuple[int, int]
) -> tuple[LoadReport, dict[str, float]]:
    """Ask the question ``warmup`` then ``measured`` times (turns, at once) against a fresh bot.

    The measured turns are asked in chats of their own; the report and CPU shares.
    """

    def plan(turns_and_concurrency: tuple[int, int], first_chat: int) -> LoadPlan:
        turns, concurrency = turns_and_concurrency
        return LoadPlan(
            turns=turns,
            concurrency=concurrency,
            text=QUESTION,
            expected_reply=ANSWER,
            first_chat=first_chat,
        )

    stats = RedisStats(redis_url)
    with ModelServerProcess(latency) as model, TelegramServerProcess() as telegram:
        settings = telegram_bench_settings(redis_url, model.base_url, telegram.base_url)
        try:
            async with RunningBot(settings), LoadClient(telegram, model) as load:
                await load.run(plan(warmup, 1))
                before = _cpu(0.0, telegram, model)
                report = await load.run(plan(measured, MEASURED_CHATS))
                after = _cpu(report.bot_cpu_seconds, telegram, model)
        finally:
            await stats.flush()
            await stats.aclose()
    return report, _utilisation(before, after, report.span_seconds(), report.fake_cpu_seconds)


async def concurrency(
    redis_url: str, *, customers: int = 1000, latency: float = 1.0
) -> dict[str, Any]:
    """``customers`` messages queued at once, model ``latency`` s: until every reply is sent."""
    report, cpu = await _load(
        redis_url,
        latency=latency,
        warmup=(20, 20),
        measured=(customers, customers),
    )
    latencies = [
        replied - pushed
        for pushed, replied in zip(report.pushed, report.replied, strict=True)
        if pushed is not None and replied is not None
    ]
    return {
        "customers": customers,
        "model_latency_s": latency,
        "all_replied_s": round(report.span_seconds(), 3),
        "first_reply_s": round(min(latencies, default=0.0), 3),
        "median_reply_s": round(percentile(latencies, 50), 3),
        **_failures(report),
        "cpu_share_of_one_core": cpu,
    }


async def saturation(redis_url: str, *, turns: int = 5000, in_flight: int = 100) -> dict[str, Any]:
    """Zero-latency model, ``in_flight`` customers waiting at any time: turns per second."""
    report, cpu = await _load(
        redis_url,
        latency=0.0,
        warmup=(500, in_flight),
        measured=(turns, in_flight),
    )
    span = report.span_seconds()
    return {
        "turns": turns,
        "in_flight": in_flight,
        "turns_per_second": round(turns / span, 1) if span else 0.0,
        **_failures(report),
        "cpu_share_of_one_core": cpu,
    }
