"""Voice messages and photos: time to the first draft after a voice, CPU and memory per image.

``python -m bench.media [--turns N]`` runs a real ``python -m bot polling`` process
against the fake Bot API and the scripted OpenAI-compatible server (both in this
process) and a private redis-server, with ``STREAMING=on`` and ``VISION=on``. The
model streams its answer as in ``bench.streaming`` (600 ms to the first token, then
50 tokens/s). Three scenarios, one chat per turn, after one warm-up turn each:

* ``text``: a typed question (the reference);
* ``voice``: a 4-second voice message (a 16 KB file) whose transcription takes
  ``--transcription-seconds`` (1 s by default);
* ``photo``: a photo with a caption; its largest size is a ``--image-kb`` file
  (200 KB by default) sent to the model as a data URL.

Printed: medians of the time from the update to the first draft with text and to
the final message, the bot process's CPU per turn (``/proc``, 10 ms ticks) and its
resident memory after the scenario's turns (``VmRSS``) and at its peak (``VmHWM``).
Results go to ``bench/results/media.json``.
"""

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.durability import start_bot, stop
from bench.stack import process_cpu_seconds
from bench.streaming import CHARS_PER_TOKEN, FIRST_TOKEN_SECONDS, TOKENS_PER_SECOND, redis_flush
from bot.testing.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    delay,
    text_answer,
    transcript,
    trickle,
)
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import FakeTelegramServer

ANSWER = (
    "Очень жаль, что товар пришёл повреждённым. Оформим возврат по заказу 8041: "
    "подтвердите, пожалуйста, кнопкой ниже, и я пришлю номер заявки."
)
RESULTS = Path(__file__).parent / "results" / "media.json"


def _streamed(body: Any) -> Reply:
    return delay(
        FIRST_TOKEN_SECONDS,
        trickle(
            text_answer(ANSWER),
            chunk_chars=CHARS_PER_TOKEN,
            interval_seconds=1 / TOKENS_PER_SECOND,
        ),
    )


def _memory_kb(pid: int) -> dict[str, int]:
    """Resident memory now and at its peak (``VmRSS``, ``VmHWM``) of process ``pid``."""
    found: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            name = line.split(":", 1)[0]
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(line.split()[1])
    return found


def _message(scenario: str, turn: int) -> tuple[str | None, dict[str, Any]]:
    if scenario == "text":
        return "Товар пришёл разбитым, заказ 8041, что делать?", {}
    if scenario == "voice":
        return None, {"voice": {"file_id": "voice", "file_unique_id": f"v{turn}", "duration": 4}}
    size = {"file_id": "image", "file_unique_id": f"i{turn}", "width": 1280, "height": 960}
    return None, {"photo": [size], "caption": "Пришёл разбитым, заказ 8041"}


async def _run(
    scenario: str, turns: int, redis: RedisServer, transcription_seconds: float, image_kb: int
) -> dict[str, float]:
    telegram = FakeTelegramServer()
    await telegram.start()
    telegram.add_file("voice", os.urandom(16 * 1024))
    telegram.add_file("image", os.urandom(image_kb * 1024))
    async with ScriptedOpenAIServer() as model:
        model.responder = _streamed
        await redis_flush(redis)
        with tempfile.TemporaryDirectory() as workdir:
            bot = await start_bot(
                "polling",
                redis.url,
                telegram.base_url,
                model.base_url,
                Path(workdir),
                STREAMING="on",
                VISION="on",
                LLM_MAX_RETRIES="0",
                DAILY_TURN_LIMIT="100000",
            )
            try:
                row = await _turns(
                    telegram,
                    model,
                    bot.pid,
                    scenario,
                    turns=turns,
                    transcription_seconds=transcription_seconds,
                )
            finally:
                await stop(bot)
                await telegram.close()
    return row


async def _turns(
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    pid: int,
    scenario: str,
    *,
    turns: int,
    transcription_seconds: float,
) -> dict[str, float]:
    first: list[float] = []
    final: list[float] = []
    for turn in range(turns + 1):
        if scenario == "voice":
            model.script_transcriptions(
                delay(transcription_seconds, transcript("Товар пришёл разбитым, что делать?"))
            )
        if turn == 1:
            # The warm-up turn (imports, first connections) is not counted.
            cpu_started = process_cpu_seconds(pid)
        chat = 9000 + turn
        text, extra = _message(scenario, turn)
        pushed = time.monotonic()
        await telegram.push_message(chat, text, extra=extra)
        await telegram.wait_for_texts(chat, 1, within=60)
        if turn == 0:
            continue
        message = next(
            c for c in telegram.calls_of("sendMessage") if c.params.get("chat_id") == chat
        )
        shown = [c.at for c in telegram.drafts(chat) if c.params.get("text")]
        first.append(min([*shown, message.at]) - pushed)
        final.append(message.at - pushed)
    cpu = process_cpu_seconds(pid) - cpu_started
    memory = _memory_kb(pid)
    return {
        "first_draft_p50_s": statistics.median(first),
        "final_message_p50_s": statistics.median(final),
        "bot_cpu_per_turn_ms": cpu / turns * 1000,
        "rss_mb": memory.get("VmRSS", 0) / 1024,
        "peak_rss_mb": memory.get("VmHWM", 0) / 1024,
    }


async def main(turns: int, transcription_seconds: float, image_kb: int) -> None:
    """Every scenario; a table on stdout, JSON to ``RESULTS``."""
    redis = RedisServer()
    redis.start()
    results: dict[str, dict[str, float]] = {}
    try:
        for scenario in ("text", "voice", "photo"):
            results[scenario] = await _run(scenario, turns, redis, transcription_seconds, image_kb)
    finally:
        redis.close()
    print(
        f"{'scenario':<8} {'first draft':>11} {'final':>8} {'CPU/turn':>9} "
        f"{'RSS':>8} {'peak RSS':>9}"
    )
    for name, row in results.items():
        print(
            f"{name:<8} {row['first_draft_p50_s']:>10.2f}s {row['final_message_p50_s']:>7.2f}s "
            f"{row['bot_cpu_per_turn_ms']:>7.1f}ms {row['rss_mb']:>6.1f}MB "
            f"{row['peak_rss_mb']:>7.1f}MB"
        )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "turns": turns,
                "transcription_seconds": transcription_seconds,
                "image_kb": image_kb,
                "results": results,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10, help="turns per scenario (default 10)")
    parser.add_argument(
        "--transcription-seconds",
        type=float,
        default=1.0,
        help="how long the scripted transcription takes (default 1 s)",
    )
    parser.add_argument(
        "--image-kb", type=int, default=200, help="size of the photo's largest size (default 200)"
    )
    arguments = parser.parse_args()
    asyncio.run(main(arguments.turns, arguments.transcription_seconds, arguments.image_kb))
