"""``python -m bot console``: a terminal chat through the same ChatService as Telegram."""

import asyncio
import contextlib
import getpass
import io
import logging
import os
import signal
import sys
import threading
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, TextIO

from bot import customer_texts
from bot.actions.confirmation import Press
from bot.analysis.analyzer import AnalysisError
from bot.analysis.render import render_analysis
from bot.app import Application
from bot.chat_errors import ChatServiceError, ChatStorageError
from bot.console_answer import ConsoleAnswer
from bot.engine.chat_service import ChatReply
from bot.sessions.pending import ActionCard, Choice
from bot.sessions.store import SessionStoreError
from bot.storage.keys import safe_conversation_key
from turn import TurnContext, TurnOutcome, new_turn_id

# The console has no staff group: nobody could answer in this terminal.
OPERATOR_NOTE = (
    "console: no staff group here, so /operator answers as Telegram does without one. "
    "In Telegram with STAFF_CHAT_ID set, it opens a topic for staff and the bot stays "
    "silent until staff /close it (docs/features.md, Human handoff)."
)


CARD_MESSAGE_ID = 0
"""The console's card, as a message id: one card at a time, printed, never edited."""

_DECISIONS: dict[str, Choice] = {customer_texts.CONSOLE_YES: "yes", customer_texts.CONSOLE_NO: "no"}
"""The console's buttons: «Подтвердить» [д], «Не нужно» [н]."""


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


def _same_file(first: TextIO, second: TextIO) -> bool:
    """Whether two streams end in the same file (one terminal, one pipe); unknown counts."""
    try:
        return os.path.sameopenfile(first.fileno(), second.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return True


class ConsoleScreen:
    """The chat's lines and the log's lines on one terminal, never one inside the other.

    The prompt ``Вы: `` leaves a line open until the developer presses Enter. A
    log record arriving then (a background task, a turn's warning) would be
    written after the prompt: it goes on a line of its own and the prompt is
    shown again. Writes come from the loop and from logging threads: one lock.
    """

    PROMPT = customer_texts.CONSOLE_PROMPT

    def __init__(self, stdin: TextIO, stdout: TextIO, log_stream: TextIO) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._lock = threading.RLock()
        self._open_line = False
        self._partial = False
        self._dim = stdout.isatty()
        # Only when logs and chat share a file can one land inside the other's line.
        self._shared = _same_file(stdout, log_stream)

    def print(self, text: str = "", *, dim: bool = False) -> None:
        """One whole line of the chat."""
        if dim and self._dim:
            text = f"\x1b[2m{text}\x1b[0m"
        with self._lock:
            self._write(text + "\n")
            self._open_line = False

    def prompt(self) -> None:
        """Show the prompt; the line stays open until :meth:`entered`."""
        with self._lock:
            self._write(self.PROMPT)
            self._open_line = True

    def entered(self) -> None:
        """A line was read: a terminal's echo ended the prompt's line; a pipe's did not."""
        with self._lock:
            if self._open_line and not self._stdin.isatty():
                self._write("\n")
            self._open_line = False

    def write_partial(self, text: str) -> None:
        """A piece of a line still being written (the bot's answer as it comes)."""
        with self._lock:
            self._write(text)
            self._partial = True

    def end_partial(self) -> None:
        """End the line :meth:`write_partial` wrote (nothing if there is none)."""
        with self._lock:
            if self._partial:
                self._write("\n")
            self._partial = False

    @contextlib.contextmanager
    def log_line(self) -> Iterator[None]:
        """Around one log record's write: it starts on a line of its own."""
        with self._lock:
            reopen = self._open_line and self._shared
            if (reopen or self._partial) and self._shared:
                self._write("\n")
            yield
            if reopen:
                self._write(self.PROMPT)

    def _write(self, text: str) -> None:
        self._stdout.write(text)
        self._stdout.flush()


class ConsoleLogHandler(logging.Handler):
    """Hands each record to the handler it replaces, through :meth:`ConsoleScreen.log_line`."""

    def __init__(self, inner: logging.Handler, screen: ConsoleScreen) -> None:
        super().__init__(inner.level)
        self._inner = inner
        self._screen = screen

    def emit(self, record: logging.LogRecord) -> None:
        """Write the record as the replaced handler would, on a line of its own."""
        with self._screen.log_line():
            self._inner.handle(record)


@contextlib.contextmanager
def logs_through(screen: ConsoleScreen, stream: TextIO) -> Iterator[None]:
    """While the chat runs, root handlers writing to ``stream`` write through ``screen``.

    Handlers writing elsewhere (a file, a test's capture) cannot split a line of the chat.
    """
    root = logging.getLogger()
    replaced = [
        handler
        for handler in root.handlers
        if isinstance(handler, logging.StreamHandler) and handler.stream is stream
    ]
    wrappers = [ConsoleLogHandler(handler, screen) for handler in replaced]
    for handler, wrapper in zip(replaced, wrappers, strict=True):
        root.removeHandler(handler)
        root.addHandler(wrapper)
    try:
        yield
    finally:
        for handler, wrapper in zip(replaced, wrappers, strict=True):
            root.removeHandler(wrapper)
            root.addHandler(handler)


class Console:
    """Reads lines, answers them, prints one dim metadata line after each answer."""

    def __init__(
        self,
        app: Application,
        conversation_key: str,
        stdin: TextIO,
        screen: ConsoleScreen,
        notes: Sequence[str] = (),
    ) -> None:
        # A front end like Telegram's worker: each message a job of its own (one turn path).
        self._turns = app.local_turns()
        self._actions = app.actions
        self._analysis = app.analysis
        self._sessions = app.sessions
        self._streaming = app.settings.telegram.streaming == "on"
        self._key = conversation_key
        self._stdin = stdin
        self._screen = screen
        self._notes = tuple(notes)
        self._operator_unavailable = app.operator_unavailable

    def _print(self, text: str = "", dim: bool = False) -> None:
        self._screen.print(text, dim=dim)

    async def run(self) -> int:
        """Chat until ``/exit`` or end of input; returns the exit code."""
        self._print(customer_texts.console_greeting(self._key))
        for note in self._notes:
            self._print(note, dim=True)
        while True:
            self._screen.prompt()
            line = await _read_line(self._stdin)
            if not line:
                self._print()
                return 0
            self._screen.entered()
            text = line.strip()
            if text == "/exit":
                return 0
            if text == "/help":
                self._print(customer_texts.CONSOLE_HELP)
                continue
            if text == "/new":
                await self._reset()
                continue
            if text == "/analyze":
                await self._analyze()
                continue
            if text == "/operator":
                self._print(customer_texts.CONSOLE_BOT + self._operator_unavailable())
                self._print(OPERATOR_NOTE, dim=True)
                continue
            if text and not await self._turn(text):
                return 0

    async def _turn(self, text: str) -> bool:
        """Answer ``text``; while a card waits, ask [д/н] (anything else is the next message).

        Returns false when the input ended or ``/exit`` was typed at the card's question.
        """
        card = await self._answer(text)
        while card is not None:
            self._print(customer_texts.CONSOLE_CARD + card.text)
            self._print(customer_texts.CONSOLE_DECISION, dim=True)
            self._screen.prompt()
            line = await _read_line(self._stdin)
            if not line:
                self._print()
                return False
            self._screen.entered()
            answer = line.strip()
            if answer == "/exit":
                return False
            if answer.lower() in _DECISIONS:
                await self._decide(card, _DECISIONS[answer.lower()])
                return True
            # Not a decision: the card stays pending, as an unpressed card in Telegram.
            self._print(customer_texts.CONSOLE_CARD_WAITING, dim=True)
            if answer:
                card = await self._answer(answer) or card
        return True

    async def _analyze(self) -> None:
        """``/analyze``: the conversation so far, analysed now, printed for the developer."""
        if self._analysis is None:
            self._print("! analysis is off (ANALYSIS=off)", dim=True)
            return
        try:
            session = await self._sessions.load(self._key)
        except SessionStoreError as error:
            self._print(f"! storage_unavailable: {error}")
            return
        if session is None or not session.messages:
            self._print(customer_texts.CONSOLE_NOTHING_TO_ANALYZE)
            return
        result = await self._analysis.idle.analyse(self._key, self._key, session)
        if isinstance(result, AnalysisError):
            self._print(f"! analysis_failed: {result.kind}: {result}")
            return
        self._print(customer_texts.CONSOLE_ANALYSIS)
        for line in render_analysis(result.analysis):
            self._print("  " + line)
        tokens = result.usage.total_tokens
        self._print(
            f"model={result.model} turns={result.turns} tokens={tokens if tokens else '-'}",
            dim=True,
        )

    async def _reset(self) -> None:
        try:
            await self._turns.reset(self._key)
        except ChatServiceError as error:
            self._print(f"! {error.kind}: {error}")
            return
        self._print(customer_texts.CONSOLE_NEW_CONVERSATION)

    async def _answer(self, text: str) -> ActionCard | None:
        context = TurnContext(
            conversation_key=self._key, chat_id=self._key, user_id=None, turn_id=new_turn_id()
        )
        turn_id = context.turn_id
        # The answer is printed as the model writes it (STREAMING=on).
        stream = ConsoleAnswer(self._screen) if self._streaming else None
        try:
            reply = await self._turns.answer(context, text, stream=stream)
        except ChatServiceError as error:
            if stream is not None:
                stream.abandon()
            # What a Telegram customer reads, incident code included.
            self._print(customer_texts.CONSOLE_BOT + customer_texts.failure_message(error, turn_id))
            if error.kind is not TurnOutcome.ERROR:
                # The detail, dim; a bug's trace is in the log already (the chat goes on).
                self._print(f"! {error.kind}: {error} turn={turn_id}", dim=True)
            return None
        if stream is None or not stream.finish():
            self._print(customer_texts.CONSOLE_BOT + reply.text)
        self._print(_metadata(reply), dim=True)
        return reply.card

    async def _decide(self, card: ActionCard, choice: Choice) -> None:
        """The press of a button: settled at once, as a job of the conversation."""
        actions = self._actions
        if actions is None:
            return
        context = TurnContext(
            conversation_key=self._key, chat_id=self._key, user_id=None, turn_id=new_turn_id()
        )
        press = Press(
            action_id=card.action_id,
            choice=choice,
            presser_id=None,
            chat_id=self._key,
            card_message_id=CARD_MESSAGE_ID,
        )
        try:
            reply = await self._turns.run(context, lambda job: actions.press(self._key, job, press))
        except ChatStorageError as error:
            self._print(f"! storage: {type(error.__cause__).__name__}")
            return
        except ChatServiceError as error:
            self._print(f"! {error.kind}: {error}")
            return
        if reply is None:
            self._print(customer_texts.CONSOLE_BOT + customer_texts.CONSOLE_ACTION_GONE)
            return
        if reply.card_edit is not None:
            # The card's new text, as Telegram edits the card's message.
            self._print(customer_texts.CONSOLE_CARD + reply.card_edit.text, dim=True)
        self._print(customer_texts.CONSOLE_BOT + reply.text)


async def run_console(
    app: Application, conversation: str | None = None, notes: Sequence[str] = ()
) -> int:
    """Run the console on stdin/stdout; ``notes`` are dim banner lines under the greeting."""
    if isinstance(sys.stdin, io.TextIOWrapper):
        # Bytes that are not UTF-8 (a terminal cutting a pasted Cyrillic line
        # mid-character) become U+FFFD instead of failing the read or the turn.
        sys.stdin.reconfigure(errors="replace")
    screen = ConsoleScreen(sys.stdin, sys.stdout, sys.stderr)
    console = Console(app, console_conversation_key(conversation), sys.stdin, screen, notes)
    with logs_through(screen, sys.stderr):
        return await until_hangup(console.run())


HANGUP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that end the console as ``/exit`` does (SIGINT is Ctrl-C: asyncio's own)."""


async def until_hangup(work: Coroutine[Any, Any, int]) -> int:
    """``work``'s exit code; SIGTERM or SIGHUP (the terminal closed) cancel it: 128 + signal.

    So a closed terminal or a ``kill`` still closes the application and lets go of
    the private Redis (bot/ops/local_redis.py) instead of leaving it running.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    received: list[int] = []

    def stop(signum: int) -> None:
        received.append(signum)
        task.cancel()

    for signum in HANGUP_SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await task
    except asyncio.CancelledError:
        if not received:
            raise
        return 128 + received[0]
    finally:
        for signum in HANGUP_SIGNALS:
            loop.remove_signal_handler(signum)
