"""``python -m bot console``: a terminal chat through the same ChatService as Telegram."""

import asyncio
import contextlib
import getpass
import io
import sys
import threading
from typing import TextIO

from bot.app import Application
from bot.chat_errors import ChatInputError, ChatServiceError
from bot.chat_service import ChatReply
from bot.redis_keys import safe_conversation_key
from turn import TurnContext, new_turn_id

HELP = "Команды: /new — новый диалог, /help — эта подсказка, /exit — выход."


def console_conversation_key(name: str | None = None) -> str:
    """A local conversation id, stable per OS user unless a name is given."""
    return safe_conversation_key(name or f"console-{getpass.getuser()}", fallback="console")


def _metadata(reply: ChatReply) -> str:
    tools = ", ".join(reply.tool_names) or "—"
    tokens = "?" if reply.usage.total_tokens is None else str(reply.usage.total_tokens)
    return (
        f"model={reply.model} steps={reply.model_steps} tools={tools} tokens={tokens} "
        f"history={reply.context_history_messages}/{reply.history_messages} "
        f"summary={'yes' if reply.has_summary else 'no'} elapsed={reply.elapsed_seconds:.2f}s "
        f"turn={reply.turn_id}"
    )


async def _read_line(stdin: TextIO) -> str:
    """One line of ``stdin`` without blocking the event loop.

    The read runs in a daemon thread of its own, not in the loop's executor:
    on Ctrl-C ``asyncio.run`` waits for its executor's threads, and a thread
    blocked in ``readline`` would hold the exit until Enter is pressed.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str] = loop.create_future()

    def settle(line: str | None, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(line or "")

    def read() -> None:
        line: str | None = None
        failure: BaseException | None = None
        try:
            line = stdin.readline()
        except (OSError, ValueError) as error:
            failure = error
        # The loop may have closed while we waited for input: nobody wants the line then.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, line, failure)

    threading.Thread(target=read, name="console-stdin", daemon=True).start()
    return await done


class Console:
    """Reads lines, answers them, prints one dim metadata line after each answer."""

    def __init__(
        self, app: Application, conversation_key: str, stdin: TextIO, stdout: TextIO
    ) -> None:
        self._chat = app.chat
        self._key = conversation_key
        self._stdin = stdin
        self._stdout = stdout
        self._dim = stdout.isatty()

    def _print(self, text: str = "", dim: bool = False) -> None:
        if dim and self._dim:
            text = f"\x1b[2m{text}\x1b[0m"
        self._stdout.write(text + "\n")
        self._stdout.flush()

    async def run(self) -> int:
        """Chat until ``/exit`` or end of input; returns the exit code."""
        self._print(f"Чат поддержки (диалог {self._key}). {HELP}")
        while True:
            self._stdout.write("Вы: ")
            self._stdout.flush()
            line = await _read_line(self._stdin)
            if not line:
                self._print()
                return 0
            text = line.strip()
            if text == "/exit":
                return 0
            if text == "/help":
                self._print(HELP)
                continue
            if text == "/new":
                await self._reset()
                continue
            if text:
                await self._answer(text)

    async def _reset(self) -> None:
        try:
            await self._chat.reset(self._key)
        except ChatServiceError as error:
            self._print(f"! {error.kind}: {error}")
            return
        self._print("Начат новый диалог.")

    async def _answer(self, text: str) -> None:
        context = TurnContext(
            conversation_key=self._key, chat_id=self._key, user_id=None, turn_id=new_turn_id()
        )
        try:
            reply = await self._chat.reply(context, text)
        except ChatInputError as error:
            self._print(f"! {error}")
            return
        except ChatServiceError as error:
            self._print(f"! {error.kind}: {error} (incident {error.turn_id})")
            return
        self._print(f"Бот: {reply.text}")
        self._print(_metadata(reply), dim=True)


async def run_console(app: Application, conversation: str | None = None) -> int:
    """Run the console on stdin/stdout."""
    if isinstance(sys.stdin, io.TextIOWrapper):
        # Bytes that are not UTF-8 (a terminal cutting a pasted Cyrillic line
        # mid-character) become U+FFFD instead of failing the read or the turn.
        sys.stdin.reconfigure(errors="replace")
    console = Console(app, console_conversation_key(conversation), sys.stdin, sys.stdout)
    return await console.run()
