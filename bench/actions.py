"""Press-to-outcome of a confirmation card through the Bot API: latency, CPU, Redis trips.

``python -m bench.actions [--presses N]``: the production engine (with a Redis
client that counts round trips) in this process, intake and one worker pool,
the fake Bot API in this process too, a scripted model that proposes
``cancel_order``. Each press (a fresh chat each time) is timed from its
``callback_query`` fed to intake until the outcome message reached the fake
Bot API; CPU is this process's (engine *and* the fake Bot API: an upper
bound for the bot); round trips are the engine client's socket writes.
"""

import argparse
import asyncio
import json
from collections.abc import Sequence
from functools import partial
from time import perf_counter, process_time

from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.types import Update

from bench.stack import bench_settings, open_engine
from bench.stats import percentile
from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result, tool_result
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack

OUTCOME = "Заказ 8042 отменён. Деньги вернутся на карту в течение 5 дней."


def _proposing(
    messages: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    if messages[-1]["role"] == "tool":
        return text_result("Нажмите «Подтвердить».")
    return tool_result("cancel_order", {"order_id": "8042", "reason": "передумал"})


def _has_card(telegram: FakeTelegramServer, chat: int) -> bool:
    return bool(telegram.keyboards(chat))


def _told(telegram: FakeTelegramServer, chat: int) -> bool:
    return OUTCOME in telegram.sent_texts(chat)


async def measure(presses: int) -> dict[str, float]:
    """Run ``presses`` proposals and confirmations; the measured numbers."""
    redis = RedisServer()
    redis.start()
    telegram = FakeTelegramServer()
    await telegram.start()
    settings = bench_settings(redis.url, "http://127.0.0.1:9")
    settings = settings.model_copy(
        update={
            "telegram": settings.telegram.model_copy(update={"api_base_url": telegram.base_url})
        }
    )
    app, counters = await open_engine(settings, llm=ScriptedClient(_proposing))
    session = AiohttpSession(api=TelegramAPIServer.from_base(telegram.base_url))
    bot = Bot(token=telegram.token, session=session)
    stack = TelegramStack(app, bot, telegram=telegram)
    latencies: list[float] = []
    cpu: list[float] = []
    trips: list[int] = []
    try:
        async with stack.running():
            for index in range(presses):
                chat = 700_000 + index
                await stack.feed(telegram.message_update(chat, "отмените заказ 8042"))
                await telegram.wait_for(partial(_has_card, telegram, chat))
                card_id, _, keyboard = telegram.keyboards(chat)[0]
                press = telegram.callback_update(chat, card_id, keyboard[0][0]["callback_data"])
                update = Update.model_validate(press, context={"bot": bot})
                trips_before, cpu_before = counters.round_trips, process_time()
                started = perf_counter()
                await stack.intake.accept(update)
                await telegram.wait_for(partial(_told, telegram, chat))
                latencies.append((perf_counter() - started) * 1000)
                cpu.append((process_time() - cpu_before) * 1000)
                trips.append(counters.round_trips - trips_before)
    finally:
        await app.aclose()
        await session.close()
        await telegram.close()
        redis.close()
    warm = slice(min(10, presses // 5), None)
    ordered, cpu_ordered = sorted(latencies[warm]), sorted(cpu[warm])
    return {
        "presses": float(len(ordered)),
        "press_to_outcome_p50_ms": round(percentile(ordered, 50), 2),
        "press_to_outcome_p99_ms": round(percentile(ordered, 99), 2),
        "cpu_per_confirmation_p50_ms": round(percentile(cpu_ordered, 50), 2),
        "redis_round_trips_per_confirmation_max": float(max(trips[warm])),
        "redis_round_trips_per_confirmation_min": float(min(trips[warm])),
    }


def main() -> None:
    """Print the measurement as one JSON object."""
    parser = argparse.ArgumentParser(prog="python -m bench.actions")
    parser.add_argument("--presses", type=int, default=100)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.presses)), indent=2))


if __name__ == "__main__":
    main()
