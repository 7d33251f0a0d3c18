"""The console prints the answer as the model writes it: a real console, a real model stream."""

import asyncio
import codecs
import os
import sys
from pathlib import Path

from bot.testing.openai_server import ScriptedOpenAIServer, held_stream, text_answer, trickle
from bot.testing.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
ANSWER = "Заказ 8041 передан в службу доставки и приедет завтра до обеда."


async def test_the_answer_appears_piece_by_piece_and_once(
    openai_server: ScriptedOpenAIServer, redis_server: RedisServer
) -> None:
    # 16 pieces of 4 characters; the server stops after the first few until the test has
    # seen them printed.
    openai_server.script(
        held_stream(
            trickle(text_answer(ANSWER), chunk_chars=4, interval_seconds=0.01), after_chunks=3
        )
    )
    env = {
        **os.environ,
        "LLM_BACKEND": "openai",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": openai_server.base_url,
        "LLM_MODEL": "scripted-model",
        "LLM_MAX_RETRIES": "0",
        "REDIS_URL": redis_server.url,
        "REDIS_KEY_PREFIX": "console-stream-test",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "console",
        "--session",
        "stream",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    stdout = process.stdout
    process.stdin.write("Где заказ 8041?\n".encode())
    await process.stdin.drain()
    output = ""
    # A read may end inside a Cyrillic letter: decoded incrementally.
    decoder = codecs.getincrementaldecoder("utf-8")()

    async def read_until(text: str) -> str:
        nonlocal output
        async with asyncio.timeout(60):
            while text not in output:
                data = await stdout.read(64)
                assert data, output
                output += decoder.decode(data)
        return output

    try:
        # Printed as it came, not at the end: the first piece is on screen while the
        # server still holds the rest.
        assert ANSWER not in await read_until("Бот: Зака")
    finally:
        openai_server.release_streams()
    await read_until("model=")
    process.stdin.write(b"/exit\n")
    await process.stdin.drain()
    assert await asyncio.wait_for(process.wait(), 30) == 0

    assert output.count(ANSWER) == 1
    assert f"Бот: {ANSWER}\n" in output
