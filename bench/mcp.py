"""``python -m bench.mcp``: what a shop's MCP tool costs the bot (bench/README.md, "MCP").

Against a private redis-server and the test shop's MCP server
(``bot/testing/mcp_server.py``) as child processes, with the application built as
production builds it (``bot.app.build_application``):

- ``call_*``: one tool call through the executor, ``get_order`` over MCP (streamable
  HTTP) against ``get_support_hours`` (built in), ``--calls`` each after a warm-up,
  alternating; wall time per call and this process's CPU time per call (the bot's own
  work: the server's runs in its own process);
- ``action_*``: the round trips of one confirmed MCP action's run (the press's
  ``settle``): Redis commands (``INFO commandstats``) and MCP requests (the calls the
  server recorded);
- ``startup_s``: ``build_application`` with three servers, one of them refusing
  connections (median of ``--starts``).
"""

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from bot.actions.feature import ActionsFeature
from bot.actions.presses import Verdict
from bot.app import Application, build_application
from bot.mcp.feature import McpFeature
from bot.sessions.pending import PendingAction, new_action_id
from bot.testing.mcp_process import McpServerProcess, free_port
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result
from bot.testing.settings import make_settings
from tools.shop_backend import Customer
from turn import ToolCall, TurnContext

RESULTS = Path(__file__).parent / "results" / "mcp.json"


def _settings(redis_url: str, servers: list[dict[str, Any]]) -> Any:
    return make_settings(
        REDIS_URL=redis_url,
        REDIS_KEY_PREFIX="benchmcp",
        AUDIT_STREAM="benchmcp:audit",
        MCP_SERVERS=json.dumps(servers),
        MCP_TOOLS_TOKEN_WARNING=0,
    )


def _server(name: str, url: str) -> dict[str, Any]:
    return {"name": name, "url": url, "trust_annotations": True, "timeout_seconds": 10}


async def _calls(app: Application, count: int) -> dict[str, float]:
    context = TurnContext(conversation_key="tg:1", chat_id=1, user_id=1, turn_id="bench")
    tools = {
        "mcp": ToolCall(id="c", name="get_order", arguments='{"order_id": "8042"}'),
        "builtin": ToolCall(id="c", name="get_support_hours", arguments="{}"),
    }
    wall: dict[str, list[float]] = {name: [] for name in tools}
    cpu: dict[str, list[float]] = {name: [] for name in tools}
    for index in range(count + 20):
        for name, call in tools.items():
            started, started_cpu = time.perf_counter(), time.process_time()
            await app.executor.execute(call, context)
            if index >= 20:  # the first calls warm connections and caches
                wall[name].append(time.perf_counter() - started)
                cpu[name].append(time.process_time() - started_cpu)
    results: dict[str, float] = {}
    for name in tools:
        results[f"call_{name}_wall_ms"] = statistics.median(wall[name]) * 1000
        results[f"call_{name}_cpu_ms"] = statistics.mean(cpu[name]) * 1000
    return results


async def _commands(redis: aioredis.Redis) -> int:
    stats = await redis.info("commandstats")
    return sum(
        int(value["calls"])
        for key, value in stats.items()
        if isinstance(value, dict) and key != "cmdstat_info"
    )


async def _action(app: Application, shop: McpServerProcess, redis_url: str) -> dict[str, float]:
    actions = app.features.get(ActionsFeature)
    if actions is None:
        raise RuntimeError("the application has no action confirmations")
    pending = PendingAction(
        action_id=new_action_id(),
        tool_name="cancel_order",
        arguments=json.dumps({"order_id": "8042", "reason": "bench"}),
        description="bench",
        proposed_at=datetime.now(UTC),
        turn_id="bench",
        user_id=1,
    )
    observer = aioredis.Redis.from_url(redis_url)
    try:
        calls_before = len(shop.calls())
        commands_before = await _commands(observer)
        started = time.perf_counter()
        result = await actions.confirmations.settle(
            pending, Verdict.CONFIRM, Customer(user_id=1, chat_id=1), "tg:1"
        )
        seconds = time.perf_counter() - started
        commands = await _commands(observer) - commands_before
    finally:
        await observer.aclose()
    if not result.done:
        raise RuntimeError(f"the action was not done: {result}")
    return {
        "action_redis_commands": float(commands),
        "action_mcp_requests": float(len(shop.calls()) - calls_before),
        "action_settle_ms": seconds * 1000,
    }


async def _startup(redis_url: str, up: list[McpServerProcess], starts: int) -> float:
    down_url = f"http://127.0.0.1:{free_port()}/mcp"
    # The second server lists the same tools: its allowlist offers none of them twice.
    servers = [
        _server("one", up[0].url),
        {**_server("two", up[1].url), "tools": []},
        _server("down", down_url),
    ]
    times = []
    for _ in range(starts):
        started = time.perf_counter()
        app = await build_application(
            _settings(redis_url, servers), llm=ScriptedClient(lambda *_: text_result("ok"))
        )
        times.append(time.perf_counter() - started)
        mcp = app.features.get(McpFeature)
        degraded = mcp.servers.degraded() if mcp is not None else None
        await app.aclose()
        if degraded != ("down",):
            raise RuntimeError(f"expected only the down server degraded, got {degraded}")
    return statistics.median(times)


async def run(calls: int, starts: int) -> dict[str, float]:
    """Every measurement of this module, by name."""
    redis = RedisServer()
    redis.start()
    with tempfile.TemporaryDirectory() as scratch:
        shops = [McpServerProcess(Path(scratch) / f"calls{n}.jsonl") for n in range(2)]
        for shop in shops:
            shop.start()
        try:
            settings = _settings(redis.url, [_server("shop", shops[0].url)])
            app = await build_application(
                settings, llm=ScriptedClient(lambda *_: text_result("ok"))
            )
            try:
                results = await _calls(app, calls)
                results.update(await _action(app, shops[0], redis.url))
            finally:
                await app.aclose()
            results["startup_3_servers_1_down_s"] = await _startup(redis.url, shops, starts)
        finally:
            for shop in shops:
                shop.kill()
            redis.close()
    return results


def main() -> None:
    """Run, print and save the measurements."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--starts", type=int, default=3)
    options = parser.parse_args()
    results = asyncio.run(run(options.calls, options.starts))
    for name, value in results.items():
        print(f"{name:32} {value:10.3f}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
