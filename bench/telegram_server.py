"""The fake Bot API as a process of its own, with a load generator inside it.

``python -m bench.telegram_server --token T`` prints its Bot API base URL and
then its control URL, one a line, and serves until SIGTERM. The bot polls it
exactly as it polls Telegram (``bot/testing/telegram_server.py``).

``POST <control>/run`` with a :class:`LoadPlan` (JSON) runs a load and answers
when every turn got its reply (or the plan's timeout passed): customers' text
messages are queued as updates, at most ``concurrency`` waiting for a reply at
a time; each reply (a ``sendMessage`` to the customer's chat) releases the next
message. Times are ``time.monotonic()`` of this process (the system-wide clock
the model server's timings use too): *pushed* is when the update was queued,
waking the bot's long poll; *replied* is when the ``sendMessage`` arrived.

Running in a child process keeps the fake's own work (HTTP parsing, JSON, the
bookkeeping below) off the bot's core; its CPU time per run is reported so that
the report shows it was not the bottleneck.
"""

import argparse
import asyncio
import sys
from collections import Counter
from time import monotonic, process_time
from typing import Any

from aiohttp import web
from pydantic import BaseModel, Field

from bench.control import announce_and_serve
from bot.testing.telegram_server import FakeTelegramServer


class LoadPlan(BaseModel):
    """What one load run sends (the control request's body)."""

    turns: int = Field(gt=0)
    concurrency: int = Field(gt=0)
    text: str
    expected_reply: str
    turns_per_chat: int = Field(default=1, gt=0)
    first_chat: int = Field(default=1, gt=0)
    gap_seconds: float = Field(default=0.0, ge=0)
    timeout_seconds: float = Field(default=120.0, gt=0)


class LoadRun:
    """One run of a plan: which turn waits in which chat, when each was pushed and replied."""

    def __init__(self, plan: LoadPlan, server: "LoadServer") -> None:
        if plan.turns_per_chat > 1 and plan.concurrency > 1:
            raise ValueError("turns of one chat must not overlap: concurrency 1 for several")
        self.plan = plan
        self._server = server
        self.pushed: list[float | None] = [None] * plan.turns
        self.replied: list[float | None] = [None] * plan.turns
        self.unexpected = 0
        self.done = asyncio.Event()
        self._next = 0
        self._waiting: dict[int, int] = {}
        self._finished = 0
        self._delayed: set[asyncio.Task[None]] = set()

    def chat_of(self, turn: int) -> int:
        """The customer (chat and user id) of ``turn``."""
        return self.plan.first_chat + turn // self.plan.turns_per_chat

    async def start(self) -> None:
        """Queue the first ``concurrency`` messages in one batch."""
        first = min(self.plan.concurrency, self.plan.turns)
        await self._push(first)

    async def _push(self, count: int) -> None:
        updates = []
        for _ in range(count):
            turn, chat = self._next, self.chat_of(self._next)
            self._next += 1
            self._waiting[chat] = turn
            updates.append(self._server.message_update(chat, self.plan.text))
        now = monotonic()
        for turn in range(self._next - count, self._next):
            self.pushed[turn] = now
        await self._server.push(*updates)

    async def replied_to(self, chat_id: int, text: str) -> None:
        """A ``sendMessage`` arrived: the chat's turn is over, release the next message."""
        at = monotonic()
        turn = self._waiting.pop(chat_id, None)
        if turn is None:
            return
        self.replied[turn] = at
        if text != self.plan.expected_reply:
            self.unexpected += 1
        self._finished += 1
        if self._finished == self.plan.turns:
            self.done.set()
        if self._next >= self.plan.turns:
            return
        if self.plan.gap_seconds:
            task = asyncio.create_task(self._push_later())
            self._delayed.add(task)
            task.add_done_callback(self._delayed.discard)
        else:
            await self._push(1)

    async def _push_later(self) -> None:
        await asyncio.sleep(self.plan.gap_seconds)
        await self._push(1)

    def report(self, cpu_seconds: float, calls: Counter[str]) -> dict[str, Any]:
        """What the bench process needs: every turn's times, the fake's own cost."""
        return {
            "pushed": self.pushed,
            "replied": self.replied,
            "unexpected_replies": self.unexpected,
            "fake_cpu_seconds": cpu_seconds,
            "api_calls": dict(calls),
        }


class LoadServer(FakeTelegramServer):
    """The fake Bot API, telling the current load run about every accepted ``sendMessage``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._run: LoadRun | None = None

    async def _api_sendMessage(self, params: dict[str, Any]) -> web.Response:
        response = await super()._api_sendMessage(params)
        if response.status == 200 and self._run is not None:
            await self._run.replied_to(int(params["chat_id"]), str(params["text"]))
        return response

    async def run(self, request: web.Request) -> web.Response:
        """``POST /run``: run a :class:`LoadPlan`, answer with its report."""
        plan = LoadPlan.model_validate(await request.json())
        # The base class records every call; only this run's are of interest.
        self.calls.clear()
        run = LoadRun(plan, self)
        self._run = run
        cpu_before = process_time()
        await run.start()
        try:
            async with asyncio.timeout(plan.timeout_seconds):
                await run.done.wait()
        except TimeoutError:
            pass
        finally:
            self._run = None
        calls = Counter(call.method for call in self.calls)
        self.calls.clear()
        return web.json_response(run.report(process_time() - cpu_before, calls))


async def serve(token: str) -> None:
    """Serve until SIGTERM or SIGINT."""
    server = LoadServer(token=token)
    await server.start()
    try:
        await announce_and_serve(server.base_url, [("POST", "/run", server.run)])
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the fake Bot API process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--token", required=True, help="the bot token the fake accepts")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.token))
    return 0


if __name__ == "__main__":
    sys.exit(main())
