"""A reply's steps go to their kind's deliverer, in order; the runner knows none of the kinds.

The walk itself, with recording deliverers: the customer's steps in the
reply's order, what they leave to settle once they are done, then the steps
that follow the audit (the staff relays); a kind without a deliverer is
skipped and logged, and two deliverers for one kind are refused at assembly.
"""

import logging

import pytest

from bot.queue.delivery import Delivery
from bot.queue.delivery_steps import (
    AskQuestion,
    DeliveryStep,
    EditCard,
    SendCard,
    SendText,
    StaffRelay,
    UnknownStep,
)
from bot.queue.staff_actions import StaffAction
from bot.queue.worker import HeldLease
from bot.sessions.pending import ActionCard
from bot.telegram.delivery import DeliveryRun, StepDeliverers, route


class _Journal:
    """Deliverers that note what they were handed, in the order they were handed it."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def edit(self, step: EditCard, run: DeliveryRun) -> None:
        self.seen.append(f"edit {step.text}")

    async def text(self, step: SendText, run: DeliveryRun) -> None:
        self.seen.append(f"text {step.text}")
        if step.text == "не дошло":
            run.reached = False
            run.settle.append(self._settled)

    async def card(self, step: SendCard, run: DeliveryRun) -> None:
        self.seen.append(f"card {step.card.action_id} reached={run.reached}")

    async def relay(self, step: StaffRelay, run: DeliveryRun) -> None:
        self.seen.append(f"relay {[action.kind for action in step.actions]}")

    async def _settled(self) -> None:
        self.seen.append("settled")

    def deliverers(self) -> StepDeliverers:
        return StepDeliverers(
            [
                route(EditCard, self.edit),
                route(SendText, self.text),
                route(SendCard, self.card),
                route(StaffRelay, self.relay, after_audit=True),
            ]
        )


def _run(*steps: DeliveryStep) -> DeliveryRun:
    delivery = Delivery(job_id="1", turn_id="T1", chat_id=5, steps=steps)
    return DeliveryRun(delivery=delivery, lease=HeldLease("tg:5", "token"), blocked=False)


CARD = SendCard(card=ActionCard(action_id="A1", text="Отменить заказ"))
RELAY = StaffRelay(actions=(StaffAction(kind="post_answer"),))


async def test_the_customers_steps_go_in_order_and_the_relays_only_after_the_audit() -> None:
    journal = _Journal()
    steps = journal.deliverers()
    # The relay is written first here: its place is after the audit, whatever its index.
    run = _run(RELAY, EditCard(message_id=3, text="готово"), SendText(text="ответ"), CARD)

    await steps.to_customer(run)
    before_audit = list(journal.seen)
    await steps.after_audit(run)

    assert before_audit == ["edit готово", "text ответ", "card A1 reached=True"]
    assert journal.seen[len(before_audit) :] == ["relay ['post_answer']"]


async def test_what_a_step_leaves_to_settle_runs_after_every_customer_step() -> None:
    journal = _Journal()
    run = _run(SendText(text="не дошло"), CARD)

    await journal.deliverers().to_customer(run)

    # The card saw the text fail, and the settling came after the card (as an undelivered
    # answer is marked only after its card was withdrawn).
    assert journal.seen == ["text не дошло", "card A1 reached=False", "settled"]
    assert run.reached is False


async def test_a_step_without_a_deliverer_is_skipped_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal = _Journal()
    run = _run(UnknownStep(was="send_poll"), AskQuestion(question_id="Q"), SendText(text="ответ"))

    with caplog.at_level(logging.INFO, logger="bot.telegram.delivery"):
        await journal.deliverers().to_customer(run)
        await journal.deliverers().after_audit(run)

    assert journal.seen == ["text ответ"]
    levels = {record.getMessage(): record.levelname for record in caplog.records}
    # A kind a newer version wrote is worth a warning; a feature that is off here is not.
    assert levels == {
        "Turn T1: no deliverer of a send_poll step here; skipped": "WARNING",
        "Turn T1: no deliverer of a ask_question step here; skipped": "INFO",
    }
    assert len(caplog.records) == 2, "logged once, not again after the audit"


def test_two_deliverers_of_one_kind_are_a_wiring_mistake() -> None:
    journal = _Journal()

    with pytest.raises(ValueError, match="two deliverers of SendText"):
        StepDeliverers([route(SendText, journal.text), route(SendText, journal.text)])


def test_the_assembly_names_which_kinds_it_delivers() -> None:
    steps = _Journal().deliverers()

    assert steps.delivers(SendCard)
    assert not steps.delivers(AskQuestion)
