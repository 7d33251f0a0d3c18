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
from bot.actions.feature import ActionsFeature
from bot.actions.presses import Press
from bot.analysis.analyzer import AnalysisError
from bot.analysis.feature import AnalysisFeature
from bot.analysis.render import render_analysis
from bot.app import Application
from bot.chat_errors import ChatServiceError, ChatStorageError
from bot.console_answer import ConsoleAnswer
from bot.engine.chat_service import ChatReply
from bot.language.choice import StoredLanguage
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import EditCard
from bot.queue.job_results import JobContext, SessionChange
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

_YES_WORDS = frozenset({"д", "да", "y", "yes"})
"""What presses «Подтвердить» while a card waits, whatever the conversation's language."""
_NO_WORDS = frozenset({"н", "нет", "n", "no"})
"""What presses «Не нужно»."""


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
    """The prompt until :meth:`set_prompt` gives the conversation's language's."""

    def __init__(self, stdin: TextIO, stdout: TextIO, log_stream: TextIO) -> None:
        self._prompt = self.PROMPT
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

    def set_prompt(self, prompt: str) -> None:
        """The prompt from now on (``You: `` once the conversation is in English)."""
        with self._lock:
            self._prompt = prompt

    def prompt(self) -> None:
        """Show the prompt; the line stays open until :meth:`entered`."""
        with self._lock:
            self._write(self._prompt)
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
                self._write(self._prompt)

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
    """Reads lines, answers them, prints one dim metadata line after each answer.

    A line starting with ``/`` is a command, card or no card (Telegram reads it so
    too). While a card waits, yes or no (:func:`decision_of`) presses its button;
    any other line is the next message and the card keeps waiting. The console's
    own texts are in the conversation's language: ``DEFAULT_LANGUAGE`` until the
    customer's words or ``/language`` decide another, as in Telegram.
    """

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
        actions = app.features.get(ActionsFeature)
        self._actions = actions.confirmations if actions is not None else None
        self._analysis = app.features.get(AnalysisFeature)
        self._sessions = app.sessions
        self._languages = app.languages
        self._streaming = app.settings.telegram.streaming == "on"
        self._key = conversation_key
        self._stdin = stdin
        self._screen = screen
        self._notes = tuple(notes)
        self._operator_unavailable = app.operator_unavailable
        self._stored = StoredLanguage()
        self._texts = app.languages.texts(None)
        # The card waiting for [д/н]: one at a time, as the session keeps one pending action.
        self._card: ActionCard | None = None

    def _print(self, text: str = "", dim: bool = False) -> None:
        self._screen.print(text, dim=dim)

    def _say(self, message: str) -> None:
        """A text of the catalogs, said by the bot in the conversation's language."""
        self._print(self._tr(customer_texts.CONSOLE_BOT) + self._tr(message))

    def _tr(self, message: str) -> str:
        return self._texts.gettext(message)

    def _speak(self, language: str | None) -> None:
        """The console's own texts in ``language`` from now on (``None``: the default)."""
        self._texts = self._languages.texts(language)
        self._screen.set_prompt(self._tr(customer_texts.CONSOLE_PROMPT))

    async def run(self) -> int:
        """Chat until ``/exit`` or end of input; returns the exit code."""
        await self._resume()
        self._print(customer_texts.console_greeting(self._key, self._tr))
        for note in self._notes:
            self._print(note, dim=True)
        if self._card is not None:
            self._show_card(self._card)
        while True:
            self._screen.prompt()
            line = await _read_line(self._stdin)
            if not line:
                self._print()
                return 0
            self._screen.entered()
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if not await self._command(text):
                    return 0
                continue
            choice = decision_of(text) if self._card is not None else None
            if self._card is not None and choice is not None:
                card, self._card = self._card, None
                if not await self._decide(card, choice):
                    self._card = card
                continue
            await self._turn(text)

    async def _resume(self) -> None:
        """A conversation kept in Redis: its language, and a card still waiting."""
        try:
            session = await self._sessions.load(self._key)
        except SessionStoreError:
            # The first turn says so, as Telegram's would.
            session = None
        if session is not None:
            self._stored = StoredLanguage(language=session.language, chosen=session.language_chosen)
            pending = session.pending_action
            if pending is not None:
                self._card = ActionCard(
                    action_id=pending.action_id, text=pending.description, language=session.language
                )
        self._speak(self._stored.language)

    async def _command(self, text: str) -> bool:
        """Run a command; ``False`` for ``/exit``. A card waiting is recalled after it."""
        name, *rest = text.split(maxsplit=1)
        argument = rest[0] if rest else ""
        name = name.split("@", 1)[0].lower()
        if name == "/exit":
            return False
        if name == "/new":
            await self._reset()
            return True
        if name == "/analyze":
            await self._analyze()
        elif name == "/operator":
            self._print(
                self._tr(customer_texts.CONSOLE_BOT) + self._operator_unavailable(self._texts)
            )
            self._print(OPERATOR_NOTE, dim=True)
        elif name == "/language":
            await self._language(argument.strip())
        else:
            # /help, and a command the console does not have (Telegram shows its help too).
            self._print(self._tr(customer_texts.CONSOLE_HELP))
        self._remind()
        return True

    def _show_card(self, card: ActionCard) -> None:
        self._print(self._tr(customer_texts.CONSOLE_CARD) + card.text)
        self._print(customer_texts.console_decision(self._tr), dim=True)

    def _remind(self) -> None:
        """One line while a card waits: it is not done, and how to answer it."""
        if self._card is not None:
            self._print(
                f"{self._tr(customer_texts.CONSOLE_CARD_WAITING)} "
                f"{customer_texts.console_decision(self._tr)}",
                dim=True,
            )

    async def _turn(self, text: str) -> None:
        """Answer ``text`` in the language it decides; a new card replaces a waiting one."""
        language = self._languages.decide(self._stored, text=text)
        self._speak(language)
        card = await self._answer(text, language)
        if card is not None:
            self._card = card
            self._show_card(card)
        else:
            self._remind()

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
            self._say(customer_texts.CONSOLE_NOTHING_TO_ANALYZE)
            return
        result = await self._analysis.idle.analyse(self._key, self._key, session)
        if isinstance(result, AnalysisError):
            self._print(f"! analysis_failed: {result.kind}: {result}")
            return
        self._print(self._tr(customer_texts.CONSOLE_ANALYSIS))
        for line in render_analysis(result.analysis):
            self._print("  " + line)
        tokens = result.usage.total_tokens
        self._print(
            f"model={result.model} turns={result.turns} tokens={tokens if tokens else '-'}",
            dim=True,
        )

    async def _language(self, argument: str) -> None:
        """``/language``: the choices; ``/language en`` (or ``en-US``): fixed from now on.

        As Telegram's: the choice is committed to the session, and the customer's
        words no longer change it.
        """
        choices = self._languages.choices()
        wanted = self._languages.chosen(argument) if argument else None
        if wanted is None:
            refusal = (
                customer_texts.LANGUAGE_UNKNOWN if argument else customer_texts.LANGUAGE_CHOICES
            )
            self._print(
                self._tr(customer_texts.CONSOLE_BOT) + self._texts.format(refusal, choices=choices)
            )
            return
        chosen = self._languages.texts(wanted)

        async def choose(job: JobContext) -> SessionChange:
            return SessionChange(
                change=lambda session: session.with_language(wanted, chosen=True),
                reply=Reply.say(chosen.gettext(customer_texts.LANGUAGE_CHANGED)),
            )

        try:
            reply = await self._turns.run(self._context(), choose)
        except ChatServiceError as error:
            self._print(f"! {error.kind}: {error}")
            return
        self._stored = StoredLanguage(language=wanted, chosen=True)
        self._speak(wanted)
        if reply is not None:
            self._print(self._tr(customer_texts.CONSOLE_BOT) + reply.text)

    async def _reset(self) -> None:
        """``/new``: a card still waiting is declined first (nothing done, audited so)."""
        card = self._card
        if card is not None:
            self._print(self._tr(customer_texts.CONSOLE_CARD_CLOSED), dim=True)
            if not await self._decide(card, "no"):
                # Not settled (storage): the conversation stays, with its card.
                self._remind()
                return
            self._card = None
        try:
            await self._turns.reset(self._key)
        except ChatServiceError as error:
            self._print(f"! {error.kind}: {error}")
            return
        # A fresh session keeps no language: the next words (or Telegram's) decide, as there.
        self._stored = StoredLanguage()
        self._say(customer_texts.CONSOLE_NEW_CONVERSATION)

    def _context(self, language: str | None = None) -> TurnContext:
        return TurnContext(
            conversation_key=self._key,
            chat_id=self._key,
            user_id=None,
            turn_id=new_turn_id(),
            language=language,
        )

    async def _answer(self, text: str, language: str) -> ActionCard | None:
        context = self._context(language)
        turn_id = context.turn_id
        bot_label = self._tr(customer_texts.CONSOLE_BOT)
        # The answer is printed as the model writes it (STREAMING=on).
        stream = (
            ConsoleAnswer(
                self._screen, label=bot_label, cut=self._tr(customer_texts.CONSOLE_ANSWER_CUT)
            )
            if self._streaming
            else None
        )
        try:
            reply = await self._turns.answer(context, text, stream=stream)
        except ChatServiceError as error:
            if stream is not None:
                stream.abandon()
            # What a Telegram customer reads, incident code included.
            self._print(bot_label + customer_texts.failure_message(error, turn_id, self._tr))
            if error.kind is not TurnOutcome.ERROR:
                # The detail, dim; a bug's trace is in the log already (the chat goes on).
                self._print(f"! {error.kind}: {error} turn={turn_id}", dim=True)
            return None
        # Committed with the turn: the conversation's language from now on.
        self._stored = StoredLanguage(language=language, chosen=self._stored.chosen)
        if stream is None or not stream.finish():
            self._print(bot_label + reply.text)
        self._print(_metadata(reply), dim=True)
        return reply.card

    async def _decide(self, card: ActionCard, choice: Choice) -> bool:
        """The press of a button: settled at once, as a job of the conversation.

        ``False`` when it could not be settled (the card still waits).
        """
        actions = self._actions
        if actions is None:
            return True
        press = Press(
            action_id=card.action_id,
            choice=choice,
            presser_id=None,
            chat_id=self._key,
            card_message_id=CARD_MESSAGE_ID,
        )
        gettext = self._tr
        try:
            reply = await self._turns.run(
                self._context(), lambda job: actions.press(self._key, job, press, gettext=gettext)
            )
        except ChatStorageError as error:
            self._print(f"! storage: {type(error.__cause__).__name__}")
            return False
        except ChatServiceError as error:
            self._print(f"! {error.kind}: {error}")
            return False
        if reply is None:
            self._say(customer_texts.CONSOLE_ACTION_GONE)
            return True
        edit = reply.first(EditCard)
        if edit is not None:
            # The card's new text, as Telegram edits the card's message.
            self._print(self._tr(customer_texts.CONSOLE_CARD) + edit.text, dim=True)
        self._print(self._tr(customer_texts.CONSOLE_BOT) + reply.text)
        return True


def decision_of(line: str) -> Choice | None:
    """A card's answer typed at the prompt: yes or no, in Russian or English, in any case.

    «д», «да», "y", "yes" press «Подтвердить»; «н», «нет», "n", "no" press «Не нужно»
    (a trailing "." or "!" allowed). Anything else is no decision: the next message.
    """
    word = line.strip().rstrip(".!").strip().casefold()
    if word in _YES_WORDS:
        return "yes"
    if word in _NO_WORDS:
        return "no"
    return None


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
    the private Redis (bot/tryout/local_redis.py) instead of leaving it running.
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
