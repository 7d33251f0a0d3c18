"""Delivering a committed reply in Telegram: its steps in order, each by its kind's deliverer.

A :class:`~bot.queue.delivery.Delivery` is an ordered tuple of typed steps
(:mod:`bot.queue.delivery_steps`). Each kind has one deliverer, registered
here by the assembly (:func:`route`), written beside the feature it belongs to
(its Telegram twin): the text here, the card and its edit in
:mod:`bot.telegram.action_cards`, the question in
:mod:`bot.telegram.feedback_question`, the offer of a person in
:mod:`bot.telegram.escalation_offer`, the staff relays in
:mod:`bot.telegram.staff_desk`. The job runner walks the steps
(:class:`StepDeliverers`) and knows none of them.

What the steps find out travels in one :class:`DeliveryRun`: whether every
text reached the customer (a card is sent only after the text asking to press
it; an answered turn's audit says ``undelivered`` otherwise), whether an answer
arrived (the schedules that follow one), audit entries a step adds, and what
must wait until the customer's steps are done (marking an answer undelivered
after its card was withdrawn). The reply's audit is written once the
customer's steps are done; the steps delivered after that (the staff relays)
never hold it up.
"""

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError, TelegramForbiddenError

from bot.chat_errors import ChatServiceError
from bot.engine.chat_service import ChatService
from bot.language.choice import ConversationLanguages
from bot.language.texts import Texts
from bot.queue.delivery import Delivery
from bot.queue.delivery_steps import SendText, UnknownStep
from bot.queue.worker import HeldLease
from bot.telegram.link_keyboard import reply_keyboard
from bot.telegram.sending import ReplyNotDeliveredError, ReplySender

logger = logging.getLogger(__name__)

StepT = TypeVar("StepT")


@dataclass(frozen=True, kw_only=True)
class Outgoing:
    """What every deliverer sends with: the bot, the retrying sender, the customer's texts.

    Every send and edit goes through ``replies`` (which marks a chat blocked on a
    403); ``languages``: the customer's texts per language (``None``: the source
    texts, Russian, as they are).
    """

    bot: Bot
    replies: ReplySender
    languages: ConversationLanguages | None = None

    def texts(self, language: str | None) -> Texts | None:
        """The customer's texts in ``language`` (``None``: the source texts)."""
        return self.languages.texts(language) if self.languages is not None else None


@dataclass(kw_only=True)
class DeliveryRun:
    """One delivery in progress: the reply, the chat's lease, and what its steps found so far.

    ``reached``: every text sent so far reached the customer (``False`` once one did
    not, or the customer blocked the bot); ``answered``: a model's answer reached
    them; ``audit``: entries the steps add to the reply's own (a withdrawn card's, a
    question's once sent); ``settle``: what runs once the customer's steps are done,
    in order, before the audit is written.
    """

    delivery: Delivery
    lease: HeldLease
    blocked: bool
    reached: bool = True
    answered: bool = False
    audit: list[dict[str, str]] = field(default_factory=list)
    settle: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    @property
    def conversation_key(self) -> str:
        """The conversation the reply belongs to (the lease's)."""
        return self.lease.conversation_key


@dataclass(frozen=True, slots=True)
class StepRoute:
    """One step kind and its deliverer (made by :func:`route`, type-checked there).

    ``after_audit``: delivered once the customer's steps are done and the reply's
    audit written (the staff relays), rather than in the reply's order with them.
    """

    kind: type[object]
    deliver: Callable[[Any, DeliveryRun], Awaitable[None]]
    after_audit: bool = False


def route(
    kind: type[StepT],
    deliver: Callable[[StepT, DeliveryRun], Awaitable[None]],
    *,
    after_audit: bool = False,
) -> StepRoute:
    """The deliverer of steps of ``kind`` (``deliver`` takes that kind: checked here)."""
    return StepRoute(kind=kind, deliver=deliver, after_audit=after_audit)


class StepDeliverers:
    """Every step kind's deliverer: walks a reply's steps and hands each to its own."""

    def __init__(self, routes: Iterable[StepRoute]) -> None:
        """One route per kind (a second for the same kind is a wiring mistake: raises)."""
        self._routes: dict[type[object], StepRoute] = {}
        for each in routes:
            if each.kind in self._routes:
                raise ValueError(f"two deliverers of {each.kind.__name__}")
            self._routes[each.kind] = each

    def delivers(self, kind: type[object]) -> bool:
        """Whether steps of ``kind`` have a deliverer here."""
        return kind in self._routes

    async def to_customer(self, run: DeliveryRun) -> None:
        """The reply's steps for the customer, in order; then what they left to settle."""
        await self._walk(run, after_audit=False)
        for settle in run.settle:
            await settle()

    async def after_audit(self, run: DeliveryRun) -> None:
        """The steps that follow the audit (the staff relays), in order."""
        await self._walk(run, after_audit=True)

    async def _walk(self, run: DeliveryRun, *, after_audit: bool) -> None:
        for step in run.delivery.steps:
            found = self._routes.get(type(step))
            if found is None:
                if not after_audit:
                    # A kind a newer version wrote (worth a look), or a feature off here.
                    logger.log(
                        logging.WARNING if isinstance(step, UnknownStep) else logging.INFO,
                        "Turn %s: no deliverer of a %s step here; skipped",
                        run.delivery.turn_id,
                        step.was if isinstance(step, UnknownStep) else step.kind,
                    )
                continue
            if found.after_audit == after_audit:
                await found.deliver(step, run)


async def send_text(out: Outgoing, chat_id: int, step: SendText, turn_id: str) -> bool:
    """Send ``step``'s text (and its reply keyboard); ``False`` when it did not arrive.

    An answer goes through the answer's formatting, the bot's own words as written.
    """
    keyboard = reply_keyboard(step.keyboard, out.texts(step.language))
    try:
        if step.answer:
            await out.replies.send_answer(out.bot, chat_id, step.text, keyboard=keyboard)
        else:
            await out.replies.send_plain(out.bot, chat_id, step.text, keyboard=keyboard)
    except TelegramForbiddenError:
        logger.info("Turn %s not delivered: the customer blocked the bot", turn_id)
        return False
    except ReplyNotDeliveredError as error:
        logger.warning("Turn %s not delivered: %s", turn_id, error)
        return False
    except TelegramAPIError as error:
        logger.warning("Turn %s not delivered: %s", turn_id, type(error).__name__)
        return False
    return True


@dataclass(frozen=True, kw_only=True)
class TextDeliverer:
    """Delivers :class:`~bot.queue.delivery_steps.SendText`: the customer's text.

    To a customer who blocked the bot nothing is sent. A text that does not arrive
    makes the run unreached; an answer that does not is also marked so in the
    history (``chat``), once the customer's steps are done.
    """

    out: Outgoing
    chat: ChatService

    async def deliver(self, step: SendText, run: DeliveryRun) -> None:
        """Send the text, unless the customer blocked the bot; note whether it arrived."""
        reply = run.delivery
        if run.blocked:
            logger.info("Turn %s not delivered: the customer blocked the bot", reply.turn_id)
            sent = False
        else:
            sent = await send_text(self.out, reply.chat_id, step, reply.turn_id)
        if sent:
            run.answered = run.answered or step.answer
            return
        run.reached = False
        if step.answer:
            run.settle.append(lambda: self._mark_undelivered(run))

    async def _mark_undelivered(self, run: DeliveryRun) -> None:
        turn_id = run.delivery.turn_id
        try:
            await self.chat.mark_undelivered(run.conversation_key, run.lease.token, turn_id)
        except ChatServiceError:
            logger.warning("Turn %s: could not mark its answer undelivered", turn_id)
