"""The floor bot: the smallest correct Telegram support bot, as a process of its own.

``python -m bench.floor_bot --telegram URL --token T --model URL --redis URL``
long-polls ``getUpdates`` and answers every text message in a task of its own:
``SET NX`` of the update (de-duplication), ``GET`` of the chat's history, the
model loop (the engine's prompt and tools, as :mod:`bench.floor` runs them), one
pipeline saving the history and writing the audit entry (``SET EX``, ``XADD``),
and ``sendMessage``. No queue, no leases, no flood control, no retries, no
bound on the turns in flight: what any bot answering through this model pays at
least. ``python -m bench.durability --only customers_vs_floor`` runs it against
``python -m bot`` on the same bursts. It writes ``floor bot polling`` to stderr
once it polls.
"""

import argparse
import asyncio
import json
import logging
import sys
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from bench.control import wait_for_termination
from bench.floor import AUDIT_MAXLEN, FloorModel
from bench.stack import bench_settings
from bot.app import Application, build_application
from bot.ops import event_loop
from turn import TurnContext, new_turn_id

READY = "floor bot polling"
HISTORY_MESSAGES = 40
"""History kept and sent, as :mod:`bench.floor` keeps it."""
HISTORY_TTL_SECONDS = 86_400
POLL_TIMEOUT_SECONDS = 30

log = logging.getLogger("bench.floor_bot")


class FloorBot:
    """Polls the Bot API and answers each message (see the module docstring)."""

    def __init__(
        self,
        *,
        app: Application,
        redis: aioredis.Redis,
        http: aiohttp.ClientSession,
        telegram_url: str,
        token: str,
        model_url: str,
        prefix: str,
    ) -> None:
        self._app = app
        self._redis = redis
        self._http = http
        self._api = f"{telegram_url.rstrip('/')}/bot{token}"
        self._model = FloorModel.of(app, http, model_url)
        self._prefix = prefix
        self._stream = f"{prefix}:audit"
        self._tasks: set[asyncio.Task[None]] = set()

    async def poll(self) -> None:
        """Take updates 100 at a time and start a task per update, until cancelled."""
        offset = 0
        print(READY, file=sys.stderr, flush=True)
        while True:
            form = {"offset": offset, "timeout": POLL_TIMEOUT_SECONDS, "limit": 100}
            async with self._http.post(f"{self._api}/getUpdates", data=form) as response:
                updates = (await response.json())["result"]
            for update in updates:
                offset = max(offset, int(update["update_id"]) + 1)
                task = asyncio.create_task(self._answer(update))
                self._tasks.add(task)
                task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("turn failed", exc_info=task.exception())

    async def _answer(self, update: dict[str, Any]) -> None:
        message = update.get("message") or {}
        text = message.get("text")
        if not isinstance(text, str):
            return
        chat = int(message["chat"]["id"])
        if not await self._redis.set(
            f"{self._prefix}:seen:{update['update_id']}", 1, nx=True, ex=HISTORY_TTL_SECONDS
        ):
            return  # Telegram delivered it again: answered already
        key = f"{self._prefix}:history:{chat}"
        raw = await self._redis.get(key)
        history: list[dict[str, Any]] = json.loads(raw) if raw else []
        context = TurnContext(
            conversation_key=str(chat),
            chat_id=chat,
            user_id=int(message["from"]["id"]),
            turn_id=new_turn_id(),
        )
        answer, tools_called = await self._model.answer(
            self._model.messages(history, text), context
        )
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.set(
                key,
                json.dumps(history[-HISTORY_MESSAGES:], ensure_ascii=False),
                ex=HISTORY_TTL_SECONDS,
            )
            pipe.xadd(
                self._stream,
                self._model.audit_entry(context, tools_called),
                maxlen=AUDIT_MAXLEN,
                approximate=True,
            )
            await pipe.execute()
        form = {"chat_id": chat, "text": answer}
        async with self._http.post(f"{self._api}/sendMessage", data=form) as response:
            response.raise_for_status()


async def serve(args: argparse.Namespace) -> None:
    """Poll until SIGTERM or SIGINT."""
    # The production application only lends the prompt and the tools (with their shop
    # reads); it serves no turn here.
    app = await build_application(bench_settings(args.redis, args.model))
    redis = aioredis.Redis(
        connection_pool=aioredis.BlockingConnectionPool.from_url(
            args.redis, max_connections=app.settings.redis.max_connections, timeout=30
        )
    )
    connector = aiohttp.TCPConnector(limit=app.settings.llm.max_connections)
    try:
        async with aiohttp.ClientSession(connector=connector) as http:
            bot = FloorBot(
                app=app,
                redis=redis,
                http=http,
                telegram_url=args.telegram,
                token=args.token,
                model_url=args.model,
                prefix=args.prefix,
            )
            polling = asyncio.create_task(bot.poll())
            await wait_for_termination()
            polling.cancel()
    finally:
        await redis.aclose()
        await app.aclose()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the floor bot process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--telegram", required=True, help="the Bot API's base URL")
    parser.add_argument("--token", required=True)
    parser.add_argument("--model", required=True, help="the OpenAI-compatible base URL")
    parser.add_argument("--redis", required=True, help="redis:// URL")
    parser.add_argument("--prefix", default="floorbot", help="key prefix")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    event_loop.run(serve(args), None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
