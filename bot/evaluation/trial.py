"""One trial: a fresh shop and conversation, the customer played through the real turn path.

Each trial builds its own application (:func:`bot.app.build_application`) under a
key prefix and an audit stream of its own, so the shop's state, the session and
the audit start empty: a cancel in one trial is never seen by the next. Turns
and presses run as the console runs them (:meth:`Application.local_turns`): a
turn holds the conversation's lease and commits with its outbox entry; a press
is :meth:`CardPresses.press` in a job of the chat, committed with
``commit_without_turn`` as the Telegram handler commits it. The conversation's
language is decided per message as Telegram's middleware decides it, from the
session and the scenario's ``language`` (Telegram's ``language_code``).
"""

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot import customer_texts
from bot.actions.feature import ActionsFeature
from bot.actions.presses import Press
from bot.app import Application, build_application
from bot.audit.actions import action_entry
from bot.audit.schema import HandoffAuditEntry
from bot.audit.stream import StreamEntry, parse_entries
from bot.chat_errors import ChatServiceError
from bot.evaluation.customers import CustomerPlayer, Line, Move
from bot.evaluation.recording import RecordingShop
from bot.evaluation.scenario import CheckExpectation, Scenario
from bot.evaluation.verdicts import CheckResult, ExecutedAction, Observation, verdict
from bot.handoff.feature import HandoffFeature
from bot.language.choice import StoredLanguage
from bot.language.texts import Texts
from bot.llm.types import ToolCallingClient
from bot.queue.delivery_steps import EditCard
from bot.queue.staff_actions import HandoffTurn
from bot.sessions.handoff_machine import utc_now
from bot.sessions.models import ConversationSession
from bot.sessions.pending import ActionCard, Choice
from bot.settings import Settings
from bot.storage.connection import text_of
from bot.storage.keys import telegram_conversation
from tools.execution import ToolExecutionError
from tools.knowledge.library import HelpCenter
from tools.shop_backend import ShopBackend
from turn import ToolCall, TurnContext, new_turn_id

logger = logging.getLogger(__name__)

EVAL_CUSTOMER_NAME = "Eval customer"


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialResult:
    """How one trial ended: its reasons (none: passed) and the conversation."""

    reasons: tuple[str, ...]
    transcript: tuple[Line, ...]
    # What the verdict was given (the bot's texts, the actions executed at the shop...).
    observation: Observation
    # The customer said it was done (else the turns ran out).
    finished: bool = True

    @property
    def passed(self) -> bool:
        """No expectation failed."""
        return not self.reasons


def trial_settings(settings: Settings, prefix: str) -> Settings:
    """``settings`` with the keys and the audit stream under ``prefix`` (a trial's own)."""
    return settings.model_copy(
        update={
            "redis": settings.redis.model_copy(update={"key_prefix": prefix}),
            "audit": settings.audit.model_copy(update={"stream": f"{prefix}:audit"}),
        }
    )


@dataclass
class _Conversation:
    """What the trial saw while the customer and the bot talked."""

    transcript: list[Line] = field(default_factory=list)
    bot_texts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # The arguments of each pressed action as its card proposed them (by action id).
    proposed: dict[str, dict[str, Any]] = field(default_factory=dict)
    card: ActionCard | None = None
    messages: int = 0
    finished: bool = False

    def bot(self, text: str, speaker: str = "bot") -> None:
        if text:
            self.bot_texts.append(text)
            self.transcript.append(Line(speaker=speaker, text=text))  # type: ignore[arg-type]


class Trial:
    """Runs one scenario once against an application of its own."""

    def __init__(
        self,
        scenario: Scenario,
        settings: Settings,
        *,
        prefix: str,
        customer: CustomerPlayer,
        llm: ToolCallingClient | None = None,
        help_center: HelpCenter | None = None,
    ) -> None:
        self._scenario = scenario
        self._settings = trial_settings(settings, prefix)
        self._customer = customer
        self._llm = llm
        self._help_center = help_center
        user_id = scenario.customer.user_id
        self._user_id = user_id
        # A private chat: Telegram's chat id is the user's id.
        self._chat_id = user_id
        self._key = telegram_conversation(user_id)
        self._shop: RecordingShop | None = None

    async def run(self) -> TrialResult:
        """Build the application, play the conversation, judge it, close everything."""
        app = await build_application(
            self._settings,
            self._llm,
            clock=self._clock(),
            wrap_shop=self._wrap,
            help_center=self._help_center,
        )
        seen = _Conversation()
        try:
            await self._converse(app, seen)
            observation = await self._observe(app, seen)
        finally:
            try:
                await self._forget(app)
            finally:
                await app.aclose()
        reasons = verdict(self._scenario.expect, observation)
        return TrialResult(
            reasons=tuple(reasons),
            transcript=tuple(seen.transcript),
            observation=observation,
            finished=seen.finished,
        )

    async def _forget(self, app: Application) -> None:
        """Delete the trial's keys and audit stream (its prefix is its own)."""
        prefix = self._settings.redis.key_prefix
        doomed = [key async for key in app.redis.scan_iter(match=f"*{prefix}*", count=500)]
        for key in doomed:
            await app.redis.delete(key)

    def _clock(self) -> Callable[[], datetime]:
        now = self._scenario.now
        if now is None:
            return utc_now
        return lambda: now

    def _wrap(self, shop: ShopBackend) -> ShopBackend:
        self._shop = RecordingShop(shop)
        return self._shop

    async def _converse(self, app: Application, seen: _Conversation) -> None:
        limit = (
            self._scenario.customer.max_turns if self._scenario.customer.script is None else None
        )
        moves = 0
        while limit is None or moves < limit:
            move = await self._customer.next_move(tuple(seen.transcript))
            if move.kind == "done":
                seen.finished = True
                return
            moves += 1
            if move.kind == "say":
                await self._say(app, seen, move.text)
            else:
                await self._press(app, seen, move)

    async def _stored(self, app: Application) -> ConversationSession | None:
        return await app.sessions.load(self._key)

    def _language(
        self, app: Application, session: ConversationSession | None, text: str | None
    ) -> str:
        stored = (
            StoredLanguage(language=session.language, chosen=session.language_chosen)
            if session is not None
            else StoredLanguage()
        )
        return app.languages.decide(stored, text=text, telegram_code=self._scenario.language)

    def _context(self, language: str) -> TurnContext:
        return TurnContext(
            conversation_key=self._key,
            chat_id=self._chat_id,
            user_id=self._user_id,
            turn_id=new_turn_id(),
            language=language,
        )

    async def _say(self, app: Application, seen: _Conversation, text: str) -> None:
        seen.transcript.append(Line(speaker="customer", text=text))
        seen.messages += 1
        language = self._language(app, await self._stored(app), text)
        context = self._context(language)
        # With a staff chat, a turn may hand the conversation to a person (as Telegram's).
        customer = (
            HandoffTurn(name=EVAL_CUSTOMER_NAME, username="", message_id=seen.messages)
            if app.features.get(HandoffFeature) is not None
            else None
        )
        try:
            reply = await app.local_turns().answer(context, text, customer=customer)
        except ChatServiceError as error:
            texts = app.languages.texts(language)
            seen.bot(
                customer_texts.failure_message(
                    error, context.turn_id, customer_texts.gettext_of(texts)
                )
            )
            seen.problems.append(f"turn {seen.messages} failed: {error.kind}")
            return
        seen.bot(reply.delivery.text)
        if reply.card is not None:
            seen.card = reply.card
            seen.bot(reply.card.text, "card")

    async def _press(self, app: Application, seen: _Conversation, move: Move) -> None:
        choice: Choice = "yes" if move.kind == "confirm" else "no"
        seen.transcript.append(Line(speaker="press", text=move.kind))
        card = seen.card
        feature = app.features.get(ActionsFeature)
        actions = feature.confirmations if feature is not None else None
        if card is None or actions is None:
            seen.problems.append(f"press {move.kind}: no card was shown to press")
            return
        # The card stays the last one shown: a second press (a double tap) is pressed on it
        # again, and must change nothing.
        session = await self._stored(app)
        pending = session.pending_action if session is not None else None
        if pending is not None and pending.action_id == card.action_id:
            seen.proposed[card.action_id] = _arguments(pending.arguments)
        # The callback's language, as the middleware decides it for a press.
        texts: Texts = app.languages.texts(self._language(app, session, None))
        seen.messages += 1
        press = Press(
            action_id=card.action_id,
            choice=choice,
            presser_id=self._user_id,
            chat_id=self._chat_id,
            card_message_id=seen.messages,
        )
        gettext = customer_texts.gettext_of(texts)
        try:
            entry = await app.local_turns().run(
                self._context(texts.language),
                lambda job: actions.press(self._key, job, press, gettext=gettext),
            )
        except ChatServiceError as error:
            seen.problems.append(f"press {move.kind} failed: {error.kind}")
            return
        if entry is None:
            seen.bot(gettext(customer_texts.ACTION_STALE_ANSWER), "outcome")
            return
        edit = entry.first(EditCard)
        if edit is not None:
            seen.bot(edit.text, "card")
        seen.bot(entry.text, "outcome")

    async def _observe(self, app: Application, seen: _Conversation) -> Observation:
        await app.audit.flush()
        entries = await _audit_entries(app, self._settings.audit.stream)
        writes = {w.idempotency_key: w for w in self._shop.writes} if self._shop else {}
        executed: list[ExecutedAction] = []
        confirmed: set[str] = set()
        handoff = False
        for entry in entries:
            step = action_entry(entry)
            if step is not None:
                if step.event == "confirmed":
                    confirmed.add(step.action_id)
                if step.event in ("executed", "failed"):
                    write = writes.get(step.action_id)
                    executed.append(
                        ExecutedAction(
                            tool=step.tool_name,
                            arguments=write.arguments
                            if write is not None
                            else seen.proposed.get(step.action_id, {}),
                            outcome=step.event,
                            action_id=step.action_id,
                        )
                    )
            handoff = handoff or _handoff_opened(entry)
        session = await self._stored(app)
        handoff = handoff or (session is not None and session.handoff != "bot")
        unpressed = tuple(
            f"{w.tool}({', '.join(f'{k}={v}' for k, v in w.arguments.items() if v)})"
            for w in writes.values()
            if w.idempotency_key not in confirmed
        )
        language = self._language(app, session, None)
        checks = tuple(
            [await self._check(app, check, language) for check in self._scenario.expect.check]
        )
        return Observation(
            bot_texts=tuple(seen.bot_texts),
            actions=tuple(executed),
            unpressed_writes=unpressed,
            handoff=handoff,
            problems=tuple(seen.problems),
            checks=checks,
        )

    async def _check(self, app: Application, check: CheckExpectation, language: str) -> CheckResult:
        """Call a read tool as the model would, for this customer, after the conversation."""
        mcp = app.registry.mcp_tool(check.tool)
        if app.registry.write_tool(check.tool) is not None or (mcp is not None and mcp.needs_card):
            return CheckResult(ok=False, error_code="not_a_read_tool")
        call = ToolCall(
            id=f"eval_check_{new_turn_id()}",
            name=check.tool,
            arguments=json.dumps(check.arguments, ensure_ascii=False),
        )
        try:
            result = await app.executor.execute(call, self._context(language))
        except ToolExecutionError as error:
            return CheckResult(ok=False, error_code=error.audit.error_code or type(error).__name__)
        payload = json.loads(result.content)
        if payload.get("ok"):
            return CheckResult(ok=True, data=payload.get("data"))
        return CheckResult(ok=False, error_code=str((payload.get("error") or {}).get("code")))


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _handoff_opened(entry: StreamEntry) -> bool:
    step = entry.read_as(HandoffAuditEntry)
    return step is not None and step.event == "opened"


async def _audit_entries(app: Application, stream: str) -> list[StreamEntry]:
    """The trial's audit stream, oldest first (fields as text whatever the client decodes)."""
    raw: Any = await app.redis.xrange(stream)
    return parse_entries(
        [
            (text_of(entry_id), {text_of(k): text_of(v) for k, v in (fields or {}).items()})
            for entry_id, fields in raw or ()
        ]
    )
