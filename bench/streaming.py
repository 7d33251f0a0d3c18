"""Drafts against today's turn: time to first visible text and to the final message.

``python -m bench.streaming [--turns N]`` runs a real ``python -m bot polling``
process against the fake Bot API and the scripted OpenAI-compatible server (both in
this process) and a private redis-server. The model writes at 50 tokens/s (a token
taken as 4 characters) after a 600 ms first-token delay, streamed or not; a
non-streamed answer arrives when the streamed one would have ended. Each scenario (a
direct answer, a two-tool answer) runs with ``STREAMING=on`` and ``off``, one chat
per turn. Printed: medians of the time from the update to the first visible text (a
draft with text, or the message) and to the final message, Bot API calls per reply,
and the bot process's CPU per turn (from ``/proc``, 10 ms ticks), after one warm-up
turn that is not counted. Results go to ``bench/results/streaming.json``.
"""

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from bench.durability import start_bot, stop
from bench.stack import process_cpu_seconds
from bot.testing.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    delay,
    text_answer,
    tool_call_answer,
    trickle,
)
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import FakeTelegramServer

FIRST_TOKEN_SECONDS = 0.6
TOKENS_PER_SECOND = 50
CHARS_PER_TOKEN = 4
ANSWER = (
    "Ваш заказ 8041 передан в службу доставки и будет у вас завтра до обеда. "
    "Курьер позвонит за час до приезда. Если планы изменятся, перенести доставку "
    "можно в личном кабинете или написав сюда. Поддержка отвечает ежедневно с 9 до 21."
)
RESULTS = Path(__file__).parent / "results" / "streaming.json"


def _answer(body: Any, text: str, chunk_chars: int) -> Reply:
    """``text`` written at 50 tokens/s after the first-token delay, streamed or whole."""
    tokens = len(text) / CHARS_PER_TOKEN
    if isinstance(body, dict) and body.get("stream"):
        return delay(
            FIRST_TOKEN_SECONDS,
            trickle(
                text_answer(text),
                chunk_chars=chunk_chars,
                interval_seconds=chunk_chars / CHARS_PER_TOKEN / TOKENS_PER_SECOND,
            ),
        )
    return delay(FIRST_TOKEN_SECONDS + tokens / TOKENS_PER_SECOND, text_answer(text))


def _responder(scenario: str, chunk_chars: int) -> Any:
    def respond(body: Any) -> Reply:
        tool_results = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        if scenario == "two_tools" and tool_results == 0:
            return delay(
                FIRST_TOKEN_SECONDS, tool_call_answer("get_order_status", {"order_id": "8041"})
            )
        if scenario == "two_tools" and tool_results == 1:
            return delay(FIRST_TOKEN_SECONDS, tool_call_answer("get_support_hours", {}))
        return _answer(body, ANSWER, chunk_chars)

    return respond


async def _run(
    scenario: str, streaming: str, turns: int, redis: RedisServer, chunk_chars: int
) -> dict[str, float]:
    telegram = FakeTelegramServer()
    await telegram.start()
    async with ScriptedOpenAIServer() as model:
        model.responder = _responder(scenario, chunk_chars)
        await redis_flush(redis)
        with tempfile.TemporaryDirectory() as workdir:
            bot = await start_bot(
                "polling",
                redis.url,
                telegram.base_url,
                model.base_url,
                Path(workdir),
                STREAMING=streaming,
                LLM_MAX_RETRIES="0",
            )
            try:
                row = await _turns(telegram, bot.pid, turns)
            finally:
                await stop(bot)
                await telegram.close()
    return row


async def _turns(telegram: FakeTelegramServer, pid: int, turns: int) -> dict[str, float]:
    first: list[float] = []
    final: list[float] = []
    calls: list[int] = []
    # One turn first, not counted: the first streamed answer imports and builds what
    # the SDK streams with, once per process.
    await telegram.push_message(8999, "Здравствуйте!")
    await telegram.wait_for_texts(8999, 1, within=30)
    cpu_started = process_cpu_seconds(pid)
    for turn in range(turns):
        chat = 9000 + turn
        pushed = time.monotonic()
        await telegram.push_message(chat, "Где заказ 8041 и когда вы работаете?")
        await telegram.wait_for_texts(chat, 1, within=30)
        message = next(
            c for c in telegram.calls_of("sendMessage") if c.params.get("chat_id") == chat
        )
        shown = [c.at for c in telegram.drafts(chat) if c.params.get("text")]
        first.append(min([*shown, message.at]) - pushed)
        final.append(message.at - pushed)
        calls.append(
            sum(
                1
                for c in telegram.calls
                if c.params.get("chat_id") == chat
                and c.method in ("sendMessage", "sendMessageDraft", "sendChatAction")
            )
        )
    cpu = process_cpu_seconds(pid) - cpu_started
    return {
        "first_visible_p50_s": statistics.median(first),
        "final_message_p50_s": statistics.median(final),
        "bot_api_calls_per_reply": statistics.mean(calls),
        "bot_cpu_per_turn_ms": cpu / turns * 1000,
    }


async def redis_flush(redis: RedisServer) -> None:
    """Every run starts on an empty Redis (update ids repeat between fake servers)."""
    client = aioredis.Redis.from_url(redis.url)
    try:
        await client.flushall()
    finally:
        await client.aclose()


async def main(turns: int, chunk_chars: int) -> None:
    """Every scenario with streaming on and off; a table on stdout, JSON to ``RESULTS``."""
    redis = RedisServer()
    redis.start()
    results: dict[str, dict[str, float]] = {}
    try:
        for scenario in ("direct", "two_tools"):
            for streaming in ("off", "on"):
                results[f"{scenario}/{streaming}"] = await _run(
                    scenario, streaming, turns, redis, chunk_chars
                )
    finally:
        redis.close()
    print(f"{'scenario':<16} {'first text':>10} {'final':>8} {'calls':>6} {'CPU/turn':>9}")
    for name, row in results.items():
        print(
            f"{name:<16} {row['first_visible_p50_s']:>9.2f}s {row['final_message_p50_s']:>7.2f}s "
            f"{row['bot_api_calls_per_reply']:>6.1f} {row['bot_cpu_per_turn_ms']:>7.1f}ms"
        )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps({"turns": turns, "chunk_chars": chunk_chars, "results": results}, indent=2)
        + "\n"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5, help="turns per scenario (default 5)")
    parser.add_argument(
        "--chunk-chars",
        type=int,
        default=CHARS_PER_TOKEN,
        help="characters per streamed event (default 4: one token, as OpenAI sends)",
    )
    arguments = parser.parse_args()
    asyncio.run(main(arguments.turns, arguments.chunk_chars))
