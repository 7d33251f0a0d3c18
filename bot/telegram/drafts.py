"""The answer as it is written, shown as a Telegram draft (``sendMessageDraft``) in private chats.

A draft is an ephemeral preview (about 30 s); the answer persists only when the
final message is sent, which stays the worker's job (commit, outbox,
``sendMessage``). Drafts are best-effort and never in the way of that message:

* one non-zero ``draft_id`` per reply (updates with the same id animate);
* at most one update per ``interval_seconds``, and only when the text changed
  (a streamed text only grows); plain text, cut at 4096 UTF-16 units;
* while tools run, a placeholder naming the tool's purpose, never its arguments;
  a turn with nothing to show after 1 s shows Telegram's "thinking" draft (empty
  text) instead of "typing"; whatever is shown is renewed before the 30 s a
  draft lives;
* a 429 pauses drafts for that chat for its ``retry_after`` (this reply and the
  next ones); any other failure turns drafts off for this reply;
* the publisher stops the moment the turn ends: a draft still in flight is
  cancelled, never awaited.
"""

import asyncio
import contextlib
import logging
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Self

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError, TelegramRetryAfter

from bot.language.texts import Texts
from bot.metrics import BotMetrics
from bot.sessions.models import HandoffState
from bot.settings import Settings
from bot.telegram.draft_labels import tools_label
from bot.telegram.draft_metrics import DraftMetrics

logger = logging.getLogger(__name__)

DRAFT_TEXT_LIMIT: Final = 4096
"""Telegram's limit of a draft's text, in UTF-16 code units."""

DRAFT_RENEW_SECONDS: Final = 20.0
"""A draft shown this long without change is sent again (Telegram drops it after ~30 s)."""

THINKING_AFTER_SECONDS: Final = 1.0
"""A turn with nothing to show yet shows Telegram's "thinking" draft (empty text) from then on."""

CLEAR_TIMEOUT_SECONDS: Final = 0.5
"""The empty draft before the final message waits no longer than this."""

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftPolicy:
    """When drafts are shown: ``enabled`` (``STREAMING``), how often (seconds between updates)."""

    enabled: bool
    interval_seconds: float
    renew_seconds: float = DRAFT_RENEW_SECONDS
    thinking_after_seconds: float = THINKING_AFTER_SECONDS


class DraftPauses:
    """Chats whose drafts Telegram asked to pause (a 429 on a draft), until when.

    In-process only: a pause is short, and another process learns its own.
    """

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._until: dict[int, float] = {}
        # The earliest end of a pause held: nothing to forget before it.
        self._next_end = math.inf

    def __len__(self) -> int:
        """Chats with a pause still remembered (ended pauses are forgotten on any use)."""
        return len(self._until)

    def pause(self, chat_id: int, seconds: float) -> None:
        """No drafts to ``chat_id`` for ``seconds`` from now."""
        now = self._clock()
        self._forget_ended(now)
        until = max(self._until.get(chat_id, 0.0), now + seconds)
        self._until[chat_id] = until
        self._next_end = min(self._next_end, until)

    def remaining(self, chat_id: int) -> float:
        """Seconds until drafts to ``chat_id`` may go again (0 when they may now)."""
        now = self._clock()
        self._forget_ended(now)
        until = self._until.get(chat_id)
        return 0.0 if until is None else until - now

    def _forget_ended(self, now: float) -> None:
        """Drop every ended pause, whichever chat asks: a chat that never streams again
        would keep its entry for the life of the process."""
        if now < self._next_end:
            return
        self._until = {chat: until for chat, until in self._until.items() if until > now}
        self._next_end = min(self._until.values(), default=math.inf)


class Drafts:
    """Decides where drafts are shown and makes one :class:`DraftPublisher` per reply.

    Its ``policy``, ``metrics``, ``clock`` and the chats' ``pauses`` are shared by
    every publisher it makes.
    """

    def __init__(
        self,
        policy: DraftPolicy,
        *,
        metrics: DraftMetrics | None = None,
        clock: Clock = time.monotonic,
        text_filter: Callable[[str], str] | None = None,
    ) -> None:
        self.policy = policy
        self.metrics = metrics
        self.clock = clock
        self.pauses = DraftPauses(clock)
        # What the answer itself goes through before it is shown (invented help-center
        # links taken out): the preview must not show what the message will not.
        self.text_filter = text_filter

    def wanted(self, *, chat_type: str, thread_id: int | None, handoff_state: HandoffState) -> bool:
        """Drafts only in private chats, outside topics, while the bot (not a person) answers."""
        return (
            self.policy.enabled
            and chat_type == "private"
            and thread_id is None
            and handoff_state != "human"
        )

    def publisher(self, bot: Bot, chat_id: int, texts: Texts | None = None) -> "DraftPublisher":
        """A publisher for one reply to ``chat_id``, with its own draft id; its labels while
        tools run in ``texts``' language."""
        return DraftPublisher(self, bot, chat_id, texts)


class DraftPublisher:
    """A :class:`bot.engine.reply_stream.ReplyStream` that shows the reply as a draft while it runs.

    ``on_text`` and ``on_tools`` only note what changed and wake the sender task;
    the sender paces the requests. Use as ``async with``: leaving the block stops
    the sender at once.
    """

    def __init__(self, drafts: Drafts, bot: Bot, chat_id: int, texts: Texts | None = None) -> None:
        self._drafts = drafts
        self._texts = texts
        self._bot = bot
        self._chat_id = chat_id
        self.draft_id = secrets.randbelow(2**31 - 1) + 1
        self._pieces: list[str] = []
        self._placeholder: str | None = None
        self._shown: str | None = None
        self._last_sent = -float("inf")
        self._started = drafts.clock()
        self._first_seen: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._off = False
        self.active = True

    # --- ReplyStream ----------------------------------------------------------------

    def on_text(self, piece: str) -> None:
        """The model wrote ``piece`` of the current step's text."""
        self._pieces.append(piece)
        self._placeholder = None
        self._wake.set()

    def on_tools(self, names: tuple[str, ...]) -> None:
        """Tools run now: their purpose replaces whatever the step wrote."""
        self._pieces.clear()
        self._placeholder = tools_label(names, self._texts)
        self._wake.set()

    # --- lifecycle ------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._run(), name=f"drafts:{self.draft_id}")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.active = False
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            except Exception:
                # A bug in the preview must not cost the customer the answer.
                logger.exception("The draft publisher failed; the answer is sent as usual")

    async def clear(self) -> None:
        """Right before the final message: an empty draft with this reply's id.

        Without it the draft and the final message may both show for a moment
        (openclaw #36697). Best-effort and bounded: skipped when nothing was shown,
        drafts are off for this reply or paused for the chat; at most
        ``CLEAR_TIMEOUT_SECONDS``; any failure is ignored.
        """
        self.active = False
        if self._task is not None:
            self._task.cancel()
        if self._shown is None or self._shown == "" or self._off:
            return
        if self._drafts.pauses.remaining(self._chat_id) > 0:
            return
        try:
            async with asyncio.timeout(CLEAR_TIMEOUT_SECONDS):
                await self._bot.send_message_draft(
                    chat_id=self._chat_id, draft_id=self.draft_id, text="", parse_mode=None
                )
        except (TelegramAPIError, TimeoutError) as error:
            logger.info("Draft not cleared before the final message: %s", type(error).__name__)

    # --- the sender -----------------------------------------------------------------

    def _visible(self) -> tuple[str, str] | None:
        """What the draft should show now and its kind, or ``None`` for nothing yet."""
        if self._placeholder is not None:
            return self._placeholder, "placeholder"
        text = "".join(self._pieces).strip()
        if self._drafts.text_filter is not None:
            text = self._drafts.text_filter(text).strip()
        if not text:
            return None
        return cut_utf16(text, DRAFT_TEXT_LIMIT), "answer"

    def _timeout(self) -> float:
        """Until the "thinking" draft is due (nothing shown yet) or the shown one is renewed."""
        if self._shown is None:
            due = self._started + self._drafts.policy.thinking_after_seconds
        else:
            due = self._last_sent + self._drafts.policy.renew_seconds
        return max(0.0, due - self._drafts.clock())

    async def _run(self) -> None:
        policy, clock = self._drafts.policy, self._drafts.clock
        while self.active:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._timeout())
            self._wake.clear()
            wait = max(
                self._last_sent + policy.interval_seconds - clock(),
                self._drafts.pauses.remaining(self._chat_id),
            )
            if wait > 0:
                # Pieces that arrive meanwhile are gathered into the next update.
                await asyncio.sleep(wait)
            visible = self._visible()
            if visible is None:
                if clock() - self._started < policy.thinking_after_seconds:
                    continue
                # A slow start: Telegram's "thinking" draft instead of "typing".
                visible = ("", "thinking")
            text, kind = visible
            renew = clock() - self._last_sent >= policy.renew_seconds
            if text == self._shown and not renew:
                continue
            await self._send(text, kind)

    async def _send(self, text: str, kind: str) -> None:
        try:
            await self._bot.send_message_draft(
                chat_id=self._chat_id, draft_id=self.draft_id, text=text, parse_mode=None
            )
        except TelegramRetryAfter as error:
            self._drafts.pauses.pause(self._chat_id, float(error.retry_after))
            self._count_error(error)
            # What was not shown is still due: the next update goes after the pause.
            self._wake.set()
            return
        except TelegramAPIError as error:
            self._count_error(error)
            logger.info("Drafts off for this reply: %s", type(error).__name__)
            self._off = True
            self.active = False
            return
        self._last_sent = self._drafts.clock()
        self._shown = text
        metrics = self._drafts.metrics
        if metrics is not None:
            metrics.drafts_sent.labels(kind=kind).inc()
            if kind not in self._first_seen:
                self._first_seen.add(kind)
                metrics.first_text_seconds.labels(kind=kind).observe(
                    self._last_sent - self._started
                )

    def _count_error(self, error: TelegramAPIError) -> None:
        if self._drafts.metrics is not None:
            self._drafts.metrics.count_error(error)


def drafts_of(
    settings: Settings,
    metrics: BotMetrics | None,
    *,
    text_filter: Callable[[str], str] | None = None,
) -> Drafts:
    """The process's drafts as configured (``STREAMING``, ``STREAM_DRAFT_INTERVAL_SECONDS``).

    ``text_filter``: what the answer goes through before it is sent, applied to the
    preview too.
    """
    policy = DraftPolicy(
        enabled=settings.telegram.streaming == "on",
        interval_seconds=settings.telegram.stream_draft_interval_seconds,
    )
    return Drafts(
        policy,
        metrics=DraftMetrics(metrics.registry) if metrics is not None else None,
        text_filter=text_filter,
    )


def cut_utf16(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-16 code units (never inside a character)."""
    if len(text) <= limit // 2:
        return text
    encoded = text.encode("utf-16-le")
    if len(encoded) <= limit * 2:
        return text
    return encoded[: limit * 2].decode("utf-16-le", errors="ignore")
