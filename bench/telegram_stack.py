"""The whole bot over real sockets: fake Bot API and scripted model as child processes.

The bot runs in the bench process as ``python -m bot polling`` runs it: the
production engine (:func:`bench.stack.open_engine`, i.e. ``build_application``
with a Redis client that counts round trips), ``create_bot`` from the runner,
the runner's Telegram side (:func:`bot.telegram.assembly.build_telegram_side`
through :class:`bot.testing.telegram_stack.TelegramStack`), long polling with
the runner's options, and the runner's drain at the end. The load generator lives in the fake Bot
API's process (:mod:`bench.telegram_server`), so driving the load costs the
bot's process nothing while a measurement runs.
"""

from contextlib import AsyncExitStack
from dataclasses import dataclass
from time import process_time
from typing import Any, Self

import aiohttp
from pydantic import SecretStr

from bench.stack import (
    BOT_TOKEN,
    ChildServer,
    ModelServerProcess,
    RedisCounters,
    bench_settings,
    open_engine,
)
from bench.telegram_server import LoadPlan
from bot.settings import Settings
from bot.telegram.process import create_bot
from bot.testing.telegram_stack import TelegramStack


class TelegramServerProcess(ChildServer):
    """``python -m bench.telegram_server``: the fake Bot API with the load generator."""

    def __init__(self) -> None:
        super().__init__("bench.telegram_server", "--token", BOT_TOKEN, urls=2)


def telegram_bench_settings(redis_url: str, model_base_url: str, telegram_url: str) -> Settings:
    """Production defaults (flood control included), pointed at the bench's servers."""
    settings = bench_settings(redis_url, model_base_url)
    telegram = settings.telegram.model_copy(
        update={"bot_token": SecretStr(BOT_TOKEN), "api_base_url": telegram_url}
    )
    return settings.model_copy(update={"telegram": telegram})


class RunningBot:
    """The bot polling the fake Bot API, from ``async with`` until its end (graceful stop)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._exit = AsyncExitStack()
        self.counters = RedisCounters()

    async def __aenter__(self) -> Self:
        app, self.counters = await open_engine(self._settings)
        self._exit.push_async_callback(app.aclose)
        bot = create_bot(self._settings)
        self._exit.push_async_callback(bot.session.close)
        await bot.me()
        await bot.delete_webhook(drop_pending_updates=False)
        # The runner's polling mode (bot.telegram.process): intake by polling, plus workers.
        await self._exit.enter_async_context(TelegramStack(app, bot).running(poll=True))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        # Polling stops, the workers finish, then the bot's session and the engine close.
        await self._exit.aclose()


@dataclass(frozen=True)
class LoadReport:
    """One load run as the fake Bot API saw it, plus the model server's request spans."""

    pushed: list[float | None]
    replied: list[float | None]
    unexpected_replies: int
    fake_cpu_seconds: float
    api_calls: dict[str, int]
    model_intervals: list[tuple[float, float]]
    bot_cpu_seconds: float
    """This process's CPU time (the bot's) from the plan's start to its last reply,
    without the bench's own requests before and after (timings, the report)."""

    @property
    def missing(self) -> int:
        """Turns that got no reply within the plan's timeout."""
        return sum(1 for at in self.replied if at is None)

    def span_seconds(self) -> float:
        """From the first message queued to the last reply sent."""
        pushed = [at for at in self.pushed if at is not None]
        replied = [at for at in self.replied if at is not None]
        return max(replied) - min(pushed) if pushed and replied else 0.0

    def turn_seconds(self) -> list[tuple[float, float]]:
        """Per turn that got its reply: (wall seconds, model seconds within it).

        Meaningful for sequential plans, where one turn runs at a time: every
        model request handled inside a turn's window belongs to that turn.
        """
        intervals = sorted(self.model_intervals)
        result = []
        index = 0
        for pushed, replied in zip(self.pushed, self.replied, strict=True):
            if pushed is None or replied is None:
                continue
            while index < len(intervals) and intervals[index][1] <= pushed:
                index += 1
            model = 0.0
            scan = index
            while scan < len(intervals) and intervals[scan][0] < replied:
                start, end = intervals[scan]
                model += max(0.0, min(end, replied) - max(start, pushed))
                scan += 1
            result.append((replied - pushed, model))
        return result


class LoadClient:
    """Asks the fake Bot API to run a plan and the model server for its timings."""

    def __init__(self, telegram: TelegramServerProcess, model: ModelServerProcess) -> None:
        self._telegram = telegram
        self._model = model
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def run(self, plan: LoadPlan) -> LoadReport:
        """Run ``plan`` and return what happened."""
        assert self._session is not None  # noqa: S101 - used inside ``async with``
        await self.model_intervals()  # forget requests made before this run
        cpu_before = process_time()
        async with self._session.post(
            f"{self._telegram.control_url}/run", json=plan.model_dump()
        ) as response:
            response.raise_for_status()
            bot_cpu = process_time() - cpu_before
            body: dict[str, Any] = await response.json()
        return LoadReport(
            bot_cpu_seconds=bot_cpu,
            pushed=body["pushed"],
            replied=body["replied"],
            unexpected_replies=body["unexpected_replies"],
            fake_cpu_seconds=body["fake_cpu_seconds"],
            api_calls=body["api_calls"],
            model_intervals=await self.model_intervals(),
        )

    async def model_intervals(self) -> list[tuple[float, float]]:
        """The model requests handled since the last call, as (start, end)."""
        assert self._session is not None  # noqa: S101 - used inside ``async with``
        async with self._session.get(f"{self._model.control_url}/timings") as response:
            response.raise_for_status()
            body: dict[str, Any] = await response.json()
        return [(float(start), float(end)) for start, end in body["intervals"]]
