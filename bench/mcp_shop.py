"""The demo shop's MCP server: its start-up and what a tool call costs over it.

``python -m bench.mcp_shop`` starts a redis-server and ``python -m bot shop-mcp``
as real processes, then times ``--calls`` sequential calls per tool with the
``mcp`` SDK's client over streamable HTTP, against the same built-in handler
called in this process (the server runs exactly that handler). The difference
is what the protocol costs: the SDK's client and server, HTTP, JSON-RPC.
"""

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from mcp import Client

from bot.settings import DEMO_SHOP_DATA
from bot.storage.keys import RedisKeys
from bot.testing.mcp_shop import DemoShopMcpProcess
from bot.testing.redis_server import RedisServer
from bot.tryout.demo_shop import RedisDemoShop
from tools.order_status import GetOrderStatusArguments, build_order_status_tool
from tools.product_search import SearchProductsArguments, build_product_search_tool
from tools.shop_backend import Customer
from tools.shop_data import ShopData
from turn import TurnContext


async def _timed(call: Callable[[], Awaitable[Any]], calls: int) -> tuple[float, float]:
    """Median and 95th percentile of ``calls`` sequential calls, in milliseconds."""
    for _ in range(20):
        await call()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


async def _measure(redis_url: str, prefix: str, url: str, calls: int) -> dict[str, float]:
    shop_data = ShopData.load(DEMO_SHOP_DATA)
    redis = aioredis.Redis.from_url(redis_url)
    shop = RedisDemoShop(redis, RedisKeys(prefix), shop_data)
    status = build_order_status_tool(shop_data, shop)
    search = build_product_search_tool(shop_data)
    context = TurnContext(conversation_key="bench", chat_id=777, user_id=777, turn_id="bench")
    results: dict[str, float] = {}
    try:

        async def direct_status() -> Any:
            handler: Any = status.handler
            return await handler(GetOrderStatusArguments(order_id="8042"), context)

        async def direct_search() -> Any:
            handler: Any = search.handler
            return handler(SearchProductsArguments(query="наушники"))

        results["direct_status_ms"], results["direct_status_p95_ms"] = await _timed(
            direct_status, calls
        )
        results["direct_search_ms"], results["direct_search_p95_ms"] = await _timed(
            direct_search, calls
        )
        async with Client(url) as client:

            async def mcp_status() -> Any:
                return await client.call_tool(
                    "get_order_status", {"customer_id": "777", "order_id": "8042"}
                )

            async def mcp_search() -> Any:
                return await client.call_tool("search_products", {"query": "наушники"})

            async def mcp_write() -> Any:
                # Idempotent: after the first call every call answers the stored receipt.
                return await client.call_tool(
                    "change_delivery_address",
                    {"customer_id": "777", "order_id": "8042", "address": "Казань, ул. Баумана, 1"},
                )

            results["mcp_status_ms"], results["mcp_status_p95_ms"] = await _timed(mcp_status, calls)
            results["mcp_search_ms"], results["mcp_search_p95_ms"] = await _timed(mcp_search, calls)
            results["mcp_write_ms"], results["mcp_write_p95_ms"] = await _timed(mcp_write, calls)
        order = await shop.order(Customer(user_id=777, chat_id=777), "8042")
        assert order is not None  # noqa: S101 - the bench checks what it measured
        assert order.delivery_address == "Казань, ул. Баумана, 1"  # noqa: S101
    finally:
        await redis.aclose()
    return results


def main() -> None:
    """Print the start-up time and the per-call medians (and 95th percentiles)."""
    parser = argparse.ArgumentParser(prog="python -m bench.mcp_shop")
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    redis_server = RedisServer()
    redis_server.start()
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    try:
        with tempfile.TemporaryDirectory() as directory:
            process = DemoShopMcpProcess(redis_server.url, prefix, Path(directory))
            started = time.perf_counter()
            process.start()
            startup = time.perf_counter() - started
            try:
                results = asyncio.run(_measure(redis_server.url, prefix, process.url, args.calls))
            finally:
                process.stop()
    finally:
        redis_server.close()
    print(f"start-up to listening: {startup:.2f} s")
    for name, value in results.items():
        print(f"{name}: {value:.3f}")


if __name__ == "__main__":
    main()
