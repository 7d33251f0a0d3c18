"""Engine-level scenarios: ChatService as built for production, over real sockets.

Each scenario starts what it needs (the scripted model in-process or as a child
process), uses the run's redis-server, and returns a JSON-able dict.
"""

import asyncio
import os
import statistics
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from time import monotonic, perf_counter, process_time
from typing import Any, Protocol

import aiohttp
import httpx2
import redis.asyncio as aioredis
from openai import AsyncOpenAI

from bench.floor import FloorModel, FloorTurn
from bench.model_script import TWO_TOOLS, is_summary_request
from bench.stack import (
    CountingConnection,
    ModelServerProcess,
    RedisCounters,
    RedisStats,
    TimedOpenAIServer,
    bench_settings,
    open_engine,
    rss_bytes,
)
from bench.stats import latency_summary_ms, percentile, slope
from bot.app import Application
from bot.engine.chat_service import ChatReply
from bot.llm.http_client import ChatHttpClient, ChatTransport, session_factory
from bot.llm.openai_client import DEFAULT_MAX_CONNECTIONS, OpenAIChatClient
from bot.llm.tokens import estimate_messages_tokens
from turn import TurnContext, new_turn_id

QUESTION = "Здравствуйте! Подскажите, пожалуйста, где сейчас мой заказ 8041 и когда его привезут?"
TURNS_PER_CONVERSATION = 5
"""Overhead turns are spread over short conversations: some history, no summaries."""


async def ask(app: Application, key: str, text: str, user_id: int = 1) -> ChatReply:
    """One turn through the engine as the console makes it (lease, turn, commit, audit)."""
    context = TurnContext(conversation_key=key, chat_id=key, user_id=user_id, turn_id=new_turn_id())
    return await app.local_turns().answer(context, text)


async def overhead(redis_url: str, *, turns: int, two_tools: bool) -> dict[str, Any]:
    """Bot time per turn (wall time minus the model server's time) and Redis cost per turn."""
    text = f"{QUESTION} {TWO_TOOLS}" if two_tools else QUESTION
    stats = RedisStats(redis_url)
    server = TimedOpenAIServer()
    async with server:
        app, counters = await open_engine(bench_settings(redis_url, server.base_url))
        try:
            for i in range(50):  # warm-up: connections, script cache, first-call imports
                await ask(app, f"warm{i // TURNS_PER_CONVERSATION}", text)
            await stats.reset()
            trips, commands = counters.round_trips, counters.commands
            requests = len(server.requests)
            bot_seconds = []
            for i in range(turns):
                key = f"o{i // TURNS_PER_CONVERSATION}"
                started, model_before = perf_counter(), server.model_seconds
                reply = await ask(app, key, text, user_id=1000 + i)
                wall = perf_counter() - started
                bot_seconds.append(wall - (server.model_seconds - model_before))
                assert not reply.summary_updated  # noqa: S101 - would add a model call
            per_turn = {
                name: round(count / turns, 2) for name, count in (await stats.commands()).items()
            }
            result = {
                "turns": turns,
                "model_requests_per_turn": round((len(server.requests) - requests) / turns, 2),
                "bot_overhead": latency_summary_ms(bot_seconds),
                "redis": {
                    "round_trips_per_turn": round((counters.round_trips - trips) / turns, 2),
                    "top_level_commands_per_turn": round((counters.commands - commands) / turns, 2),
                    "server_commands_per_turn": round(sum(per_turn.values()), 2),
                    "scripts_per_turn": round(
                        per_turn.get("evalsha", 0) + per_turn.get("eval", 0), 2
                    ),
                    "server_commands_by_name": per_turn,
                },
            }
        finally:
            await app.aclose()
            await stats.flush()
            await stats.aclose()
    return result


TurnRunner = Callable[[str, int], Awaitable[Any]]


@dataclass(frozen=True, kw_only=True)
class Rounds:
    """How an interleaved comparison runs: ``rounds`` rounds of ``turns`` turns per side.

    The default is what a reader outside measured with (6 rounds of 200 turns). The
    earlier default, 50 rounds of 10, switched sides every few milliseconds and gave
    a lower p50 ratio than long rounds in the same hour (bench/README.md, "Issue 49");
    each round's own ratio is reported too, so the spread shows.
    """

    rounds: int = 6
    turns: int = 200
    warmup: int = 50


async def floor_two_tools(redis_url: str, plan: Rounds) -> dict[str, Any]:
    """The engine's two-tool turn against the floor (:mod:`bench.floor`), interleaved.

    Both use the same zero-latency scripted model (a child process, so its CPU is
    not counted here) and the same Redis client. ``ratio_p50`` and ``ratio_cpu``
    are engine/floor.
    """
    return await _engine_against(redis_url, "floor", _floor, plan)


async def agents_sdk_two_tools(redis_url: str, plan: Rounds) -> dict[str, Any]:
    """The engine's two-tool turn against the OpenAI Agents SDK's (:mod:`bench.agents_sdk`).

    Interleaved as in :func:`floor_two_tools`, against the same zero-latency scripted
    model (a child process) and the same redis-server: ``Runner.run`` with a
    ``RedisSession`` on a redis-py client of its own (counting round trips like the
    engine's). ``ratio_p50`` and ``ratio_cpu`` are engine/agents_sdk. Needs the bench
    extra (``requirements-bench.lock``).
    """
    side = partial(_agents_sdk, redis_url)
    return await _engine_against(redis_url, "agents_sdk", side, plan)


class _Replier(Protocol):
    async def reply(self, key: str, text: str, context: TurnContext) -> str: ...


ComparedSide = Callable[
    [Application, aiohttp.ClientSession, str],
    AbstractAsyncContextManager[tuple[_Replier, RedisCounters | None]],
]
"""Builds the side compared with the engine (its own Redis counters, or ``None``: the engine's)."""


async def _engine_against(
    redis_url: str, name: str, side: ComparedSide, plan: Rounds
) -> dict[str, Any]:
    text = f"{QUESTION} {TWO_TOOLS}"
    with ModelServerProcess(0.0) as model:
        async with aiohttp.ClientSession() as http:
            app, counters = await open_engine(bench_settings(redis_url, model.base_url))
            try:
                async with side(app, http, model.base_url) as (other, other_counters):
                    runners: dict[str, tuple[TurnRunner, RedisCounters]] = {
                        "engine": (lambda key, user_id: ask(app, key, text, user_id), counters),
                        name: (_replier(other, text), other_counters or counters),
                    }
                    result = await _interleaved(runners, model, http, plan)
            finally:
                await app.aclose()
                await RedisStats(redis_url).flush_and_close()
    return _with_ratios(result, "engine", name)


@asynccontextmanager
async def _floor(
    app: Application, http: aiohttp.ClientSession, base_url: str
) -> AsyncIterator[tuple[_Replier, RedisCounters | None]]:
    settings = app.settings
    yield (
        FloorTurn(
            redis=app.redis,
            model=FloorModel.of(app, http, base_url),
            key_prefix=settings.redis.key_prefix,
            stream=settings.audit.stream,
        ),
        None,
    )


@asynccontextmanager
async def _agents_sdk(
    redis_url: str, app: Application, http: aiohttp.ClientSession, base_url: str
) -> AsyncIterator[tuple[_Replier, RedisCounters | None]]:
    # Here, not at the top: the other scenarios run without the bench extra.
    from bench.agents_sdk import AgentsSdkTurn  # noqa: PLC0415

    counters = RedisCounters()
    redis = aioredis.Redis(
        connection_pool=aioredis.ConnectionPool.from_url(
            redis_url, connection_class=CountingConnection, counters=counters
        )
    )
    sdk = AgentsSdkTurn(
        redis=redis,
        base_url=base_url,
        api_key="sk-bench",
        model=app.settings.llm.model,
        instruction=app.chat.instruction(None),
        registry=app.registry,
        key_prefix=app.settings.redis.key_prefix,
    )
    try:
        yield sdk, counters
    finally:
        await sdk.aclose()
        await redis.aclose()


async def redis_parser_two_tools(redis_url: str, plan: Rounds) -> dict[str, Any]:
    """The engine's two-tool turn with redis-py's pure-Python parser against hiredis.

    Two engines in this process, one per parser, interleaved as in
    :func:`floor_two_tools`; ``ratio_*`` are hiredis/python.
    """
    text = f"{QUESTION} {TWO_TOOLS}"
    with ModelServerProcess(0.0) as model:
        async with aiohttp.ClientSession() as http:
            settings = bench_settings(redis_url, model.base_url)
            engines: dict[str, EngineOpener] = {
                parser: partial(open_engine, settings, parser=parser)
                for parser in ("python", "hiredis")
            }
            result = await _engines_interleaved(
                redis_url, engines, model, http, text=text, plan=plan
            )
    return _with_ratios(result, "hiredis", "python")


async def sdk_layers_two_tools(redis_url: str, plan: Rounds) -> dict[str, Any]:
    """The engine's two-tool turn with the SDK building and sending every request itself.

    Two engines in this process, interleaved as in :func:`floor_two_tools`: ``sdk``
    runs a plain ``AsyncOpenAI`` over our HTTP client with httpx2's own ``send``;
    ``production`` is the client the bot builds (the short send). ``ratio_*`` are
    production/sdk.
    """
    text = f"{QUESTION} {TWO_TOOLS}"
    with ModelServerProcess(0.0) as model:
        async with aiohttp.ClientSession() as http:
            settings = bench_settings(redis_url, model.base_url)
            llm = settings.llm
            sdk_client = OpenAIChatClient(
                AsyncOpenAI(
                    api_key="sk-bench",
                    base_url=model.base_url,
                    timeout=llm.timeout_seconds,
                    max_retries=llm.max_retries,
                    http_client=_HttpxSendClient(
                        ChatTransport(session_factory(None, DEFAULT_MAX_CONNECTIONS)),
                        trust_env=False,
                    ),
                ),
                llm.model,
                llm.instructions_role,
            )
            engines: dict[str, EngineOpener] = {
                "sdk": partial(open_engine, settings, llm=sdk_client),
                "production": partial(open_engine, settings),
            }
            result = await _engines_interleaved(
                redis_url, engines, model, http, text=text, plan=plan
            )
    return _with_ratios(result, "production", "sdk")


class _HttpxSendClient(ChatHttpClient):
    """Our HTTP client with httpx2's own ``send`` (auth flow, redirect loop, stream wrapper)."""

    send = httpx2.AsyncClient.send


EngineOpener = Callable[[], Awaitable[tuple[Application, RedisCounters]]]


async def _engines_interleaved(
    redis_url: str,
    engines: dict[str, EngineOpener],
    model: ModelServerProcess,
    http: aiohttp.ClientSession,
    *,
    text: str,
    plan: Rounds,
) -> dict[str, Any]:
    """Open each engine, run their turns with ``text`` interleaved, close them all."""
    apps: dict[str, tuple[Application, RedisCounters]] = {}
    try:
        for name, open_one in engines.items():
            apps[name] = await open_one()
        runners: dict[str, tuple[TurnRunner, RedisCounters]] = {
            name: (_asker(app, text), counters) for name, (app, counters) in apps.items()
        }
        return await _interleaved(runners, model, http, plan)
    finally:
        for app, _ in apps.values():
            await app.aclose()
        await RedisStats(redis_url).flush_and_close()


def _replier(side: _Replier, text: str) -> TurnRunner:
    """The runner of a compared side (the floor, the Agents SDK): ``text`` in a new turn."""

    async def turn(key: str, user_id: int) -> str:
        context = TurnContext(
            conversation_key=key, chat_id=key, user_id=user_id, turn_id=new_turn_id()
        )
        return await side.reply(key, text, context)

    return turn


def _asker(app: Application, text: str) -> TurnRunner:
    async def turn(key: str, user_id: int) -> ChatReply:
        # Each engine keeps to its own conversations.
        return await ask(app, f"{key}x{id(app)}", text, user_id)

    return turn


async def _interleaved(
    runners: dict[str, tuple[TurnRunner, RedisCounters]],
    model: ModelServerProcess,
    http: aiohttp.ClientSession,
    plan: Rounds,
) -> dict[str, Any]:
    """Each runner's two-tool turns in ``plan.rounds`` alternating rounds, measured alike.

    Rounds of ``plan.turns`` turns each, the order reversed every round, so a busy
    neighbour on the shared machine slows every runner alike. Time per turn is wall
    time minus the model server's handling spans inside the turn; CPU per turn is
    this process's CPU time over the turns, every thread included. Each round also
    gives its own ratios (first runner over each other), reported as median and range.
    """

    async def model_spans() -> list[tuple[float, float]]:
        async with http.get(f"{model.control_url}/timings") as response:
            return [(a, b) for a, b in (await response.json())["intervals"]]

    samples: dict[str, list[float]] = {name: [] for name in runners}
    per_round: list[dict[str, tuple[float, float]]] = []
    cpu = dict.fromkeys(runners, 0.0)
    trips = dict.fromkeys(runners, 0)
    requests = dict.fromkeys(runners, 0)
    loads = [os.getloadavg()[0]]
    for name, (run, _) in runners.items():  # warm-up
        for i in range(plan.warmup):
            await run(f"w{name}{i // TURNS_PER_CONVERSATION}", i)
    for round_index in range(plan.rounds):
        order = list(runners) if round_index % 2 == 0 else list(reversed(runners))
        this_round: dict[str, tuple[float, float]] = {}
        for name in order:
            run, counters = runners[name]
            await model_spans()  # forget the spans of earlier turns
            windows = []
            cpu_before, trips_before = process_time(), counters.round_trips
            for i in range(plan.turns):
                n = round_index * plan.turns + i
                started = monotonic()
                await run(f"{name}{n // TURNS_PER_CONVERSATION}", 1000 + n)
                windows.append((started, monotonic()))
            round_cpu = process_time() - cpu_before
            cpu[name] += round_cpu
            trips[name] += counters.round_trips - trips_before
            spans = await model_spans()
            # The same work on each side: three model requests per two-tool turn.
            requests[name] += sum(1 for a, _ in spans if windows[0][0] <= a <= windows[-1][1])
            times = [(end - start) - _inside(spans, start, end) for start, end in windows]
            samples[name].extend(times)
            this_round[name] = (percentile(times, 50), round_cpu)
        per_round.append(this_round)
    loads.append(os.getloadavg()[0])
    measured = plan.turns * plan.rounds
    result: dict[str, Any] = {
        "turns_each": measured,
        "rounds": plan.rounds,
        "turns_per_round": plan.turns,
        "loadavg_1m": loads,
    }
    for name in runners:
        result[name] = {
            "overhead": latency_summary_ms(samples[name]),
            "cpu_ms_per_turn": round(cpu[name] / measured * 1000, 3),
            "redis_round_trips_per_turn": round(trips[name] / measured, 2),
            "model_requests_per_turn": round(requests[name] / measured, 2),
        }
    result["per_round"] = per_round
    return result


def _spread(values: list[float]) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "rounds": [round(value, 3) for value in values],
    }


def _with_ratios(result: dict[str, Any], numerator: str, denominator: str) -> dict[str, Any]:
    """The pooled ratios ``numerator``/``denominator`` and their spread over the rounds."""
    top, bottom = result[numerator], result[denominator]
    result["ratio_p50"] = round(top["overhead"]["p50_ms"] / bottom["overhead"]["p50_ms"], 2)
    result["ratio_cpu"] = round(top["cpu_ms_per_turn"] / bottom["cpu_ms_per_turn"], 2)
    rounds = result.pop("per_round")
    result["ratio_p50_rounds"] = _spread([r[numerator][0] / r[denominator][0] for r in rounds])
    result["ratio_cpu_rounds"] = _spread([r[numerator][1] / r[denominator][1] for r in rounds])
    return result


def _inside(spans: list[tuple[float, float]], start: float, end: float) -> float:
    """How much of ``spans`` falls between ``start`` and ``end``."""
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in spans)


async def cost_growth(redis_url: str, *, turns: int = 60) -> dict[str, Any]:
    """Prompt tokens sent per turn over one long conversation, with window and summaries."""
    stats = RedisStats(redis_url)
    server = TimedOpenAIServer()
    async with server:
        app, _ = await open_engine(bench_settings(redis_url, server.base_url))
        key = "cost"
        session_key = app.sessions.keys(key).session
        per_turn_tokens: list[int] = []
        summary_calls = 0
        memory: dict[str, int] = {}
        first_fold = None
        try:
            for turn in range(1, turns + 1):
                seen = len(server.requests)
                await ask(app, key, f"Вопрос {turn}. {QUESTION}")
                # A customer types slower than a summary takes: let it land before the next turn.
                await app.chat.drain(grace_seconds=10)
                new = server.requests[seen:]
                per_turn_tokens.append(
                    sum(
                        estimate_messages_tokens(r.messages)
                        for r in new
                        if not is_summary_request(r.body)
                    )
                )
                folded = sum(1 for r in new if is_summary_request(r.body))
                summary_calls += folded
                if folded and first_fold is None:
                    first_fold = turn
                if turn in (10, 60):
                    memory[f"session_bytes_after_{turn}_turns"] = await stats.memory_usage(
                        session_key
                    )
        finally:
            await app.aclose()
            await stats.flush()
            await stats.aclose()
    filled = first_fold or turns
    tail = list(range(filled + 1, turns + 1))
    return {
        "turns": turns,
        "history_token_budget": 2000,
        "prompt_tokens_per_turn": per_turn_tokens,
        "prompt_tokens_turn_1": per_turn_tokens[0],
        "prompt_tokens_turn_60": per_turn_tokens[-1],
        "prompt_tokens_max": max(per_turn_tokens),
        "first_summary_at_turn": filled,
        "slope_tokens_per_turn_before_window_fills": round(
            slope(list(range(1, filled + 1)), per_turn_tokens[:filled]), 2
        ),
        "slope_tokens_per_turn_after_window_fills": round(
            slope(tail, [per_turn_tokens[t - 1] for t in tail]), 2
        ),
        "summary_calls": summary_calls,
        **memory,
    }


async def _run_turns(
    total: int, concurrency: int, turn: Callable[[int], Awaitable[ChatReply]]
) -> tuple[float, int]:
    """Run ``total`` turns with at most ``concurrency`` in flight; (seconds, failures)."""
    next_index = 0
    failures = 0

    async def worker() -> None:
        nonlocal next_index, failures
        while next_index < total:
            index = next_index
            next_index += 1
            try:
                await turn(index)
            except Exception:  # a failed turn is counted, the load goes on
                failures += 1

    started = perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return perf_counter() - started, failures


async def concurrency(
    redis_url: str, *, customers: int = 1000, latency: float = 1.0
) -> dict[str, Any]:
    """``customers`` first messages at once against a model that takes ``latency`` seconds."""
    stats = RedisStats(redis_url)
    with ModelServerProcess(latency) as model:
        app, _ = await open_engine(bench_settings(redis_url, model.base_url))
        try:
            started = perf_counter()
            results = await asyncio.gather(
                *(ask(app, f"c{i}", QUESTION, user_id=i) for i in range(customers)),
                return_exceptions=True,
            )
            elapsed = perf_counter() - started
        finally:
            await app.aclose()
            await stats.flush()
            await stats.aclose()
    failed = [r for r in results if isinstance(r, BaseException)]
    return {
        "customers": customers,
        "model_latency_s": latency,
        "all_replied_s": round(elapsed, 3),
        "failed": len(failed),
        "failure_kinds": sorted({type(f).__name__ for f in failed}),
    }


async def saturation(
    redis_url: str, *, sessions: int = 10_000, concurrency: int = 64
) -> dict[str, Any]:
    """Turns per second with a zero-latency model; bot RSS after ``sessions`` conversations."""
    stats = RedisStats(redis_url)
    with ModelServerProcess(0.0) as model:
        app, _ = await open_engine(bench_settings(redis_url, model.base_url))
        try:
            await _run_turns(500, concurrency, lambda i: ask(app, f"w{i}", QUESTION, user_id=i))
            rss_before = rss_bytes()
            elapsed, failures = await _run_turns(
                sessions, concurrency, lambda i: ask(app, f"s{i}", QUESTION, user_id=i)
            )
            rss_after = rss_bytes()
        finally:
            await app.aclose()
            await stats.flush()
            await stats.aclose()
    return {
        "turns": sessions,
        "concurrency": concurrency,
        "turns_per_second": round(sessions / elapsed, 1),
        "failures": failures,
        "rss_mb_after_warmup": round(rss_before / 2**20, 1),
        "rss_mb_after_sessions": round(rss_after / 2**20, 1),
        "rss_growth_mb": round((rss_after - rss_before) / 2**20, 1),
    }


async def soak(
    redis_url: str, *, seconds: float, concurrency: int = 50, conversations: int = 2000
) -> dict[str, Any]:
    """Steady load (50 ms model, long conversations with summaries); RSS over time."""
    stats = RedisStats(redis_url)
    with ModelServerProcess(0.05) as model:
        app, _ = await open_engine(bench_settings(redis_url, model.base_url))
        samples: list[tuple[float, int]] = []
        done = 0
        failures = 0
        deadline = monotonic() + seconds

        async def worker(offset: int) -> None:
            nonlocal done, failures
            index = offset
            while monotonic() < deadline:
                key = f"soak{index % conversations}"
                index += concurrency
                try:
                    await ask(app, key, f"{QUESTION} {TWO_TOOLS}" if index % 3 == 0 else QUESTION)
                    done += 1
                except Exception:  # counted; the soak goes on
                    failures += 1

        async def sampler() -> None:
            started = monotonic()
            while monotonic() < deadline:
                samples.append((monotonic() - started, rss_bytes()))
                await asyncio.sleep(1.0)

        try:
            await asyncio.gather(sampler(), *(worker(i) for i in range(concurrency)))
        finally:
            await app.aclose()
            await stats.flush()
            await stats.aclose()
    warm = [rss for t, rss in samples if t >= seconds * 0.25]
    after_warmup = warm[0] if warm else 0
    last = samples[-1][1] if samples else 0
    return {
        "seconds": seconds,
        "turns": done,
        "failures": failures,
        "turns_per_second": round(done / seconds, 1),
        "rss_mb_after_warmup": round(after_warmup / 2**20, 1),
        "rss_mb_at_end": round(last / 2**20, 1),
        "rss_growth_after_warmup_mb": round((last - after_warmup) / 2**20, 1),
        "rss_slope_mb_per_minute_after_warmup": round(
            slope(
                [t for t, _ in samples if t >= seconds * 0.25],
                [rss / 2**20 for t, rss in samples if t >= seconds * 0.25],
            )
            * 60,
            2,
        ),
    }
